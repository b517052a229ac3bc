"""A TLS connection the gateway's own server has closed is freed at once, not by the collector.

Issue 31, item 10: the gateway's memory grew with every TLS connection (37 -> 247 MB over
35,000), flat over plain HTTP. A connection was a reference cycle (the connection and its
parser, the connection and its last request), and it held its TLS transport, whose read
buffer and OpenSSL state then waited for the cyclic collector. Dead connections piled up
between collections and the allocator's heap grew with them. With the collector off, these
tests show nothing of a closed connection is left: over real TLS with real certificates, and
over plain HTTP alike. The memory itself, over a real gateway process and 35,000 connections,
is ``bench/gateway_tls_memory.py`` (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import ssl
from pathlib import Path

from ankka._kernel.bounded import ConnectionLimits
from ankka._kernel.tls import ReloadingServerTLS
from ankka.gateway.server import RawServer
from ankka.gateway.wire import Receive, Scope, Send
from tests.support.certs import GATEWAY_URI, client_context, new_ca, write_tls_dir

CONNECTIONS = 20


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    await receive()
    headers = [(b"content-length", b"2")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"ok"})


def _left(names: set[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for thing in gc.get_objects():
        name = type(thing).__name__
        if name in names:
            found[name] = found.get(name, 0) + 1
    return found


async def _serve_and_close(server: RawServer, client: ssl.SSLContext | None) -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    serving = asyncio.create_task(server.serve(sock))
    try:
        for _ in range(CONNECTIONS):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client, server_hostname="localhost" if client else None
            )
            writer.write(b"GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert (await reader.read()).startswith(b"HTTP/1.1 200")
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()  # the server closed first
        for _ in range(20):  # connection_lost and the request tasks' ends
            await asyncio.sleep(0)
    finally:
        server.stop()
        await serving


async def test_a_closed_tls_connection_leaves_nothing_for_the_collector(
    tmp_path: Path, collector_off: None
) -> None:
    ca = new_ca()
    tls_dir = write_tls_dir(
        tmp_path / "tls", leaf=ca.issue(GATEWAY_URI, server=True), ca_pem=ca.pem
    )
    client = client_context(ca, ca.issue("ankka://service/team/agent"), tmp_path)
    tls = ReloadingServerTLS(tls_dir)
    server = RawServer(_app, limits=ConnectionLimits(), max_body=1 << 20, ssl_context=tls.context)
    await _serve_and_close(server, client)
    assert server.connections == {}
    left = _left({"_Connection", "Cycle", "SSLObject", "_SSLProtocolTransport", "SSLProtocol"})
    # The client's own SSLObjects are its (closed) writers'; none is the server's.
    server_side = {k: v for k, v in left.items() if k != "SSLObject"}
    assert server_side == {}, f"left for the collector: {left}"
    assert left.get("SSLObject", 0) <= CONNECTIONS // 2, left


async def test_a_closed_plain_connection_leaves_nothing_for_the_collector(
    collector_off: None,
) -> None:
    server = RawServer(_app, limits=ConnectionLimits(), max_body=1 << 20)
    await _serve_and_close(server, None)
    assert _left({"_Connection", "Cycle"}) == {}
