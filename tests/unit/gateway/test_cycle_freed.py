"""A request the gateway's own server has answered leaves nothing behind for the collector.

The scope a request's app sees carries the cycle's disconnect watch (a bound method of the
cycle, which holds the request's body), and the cycle holds the task running it: unless both
are let go when the answer is out, every request is a reference cycle that only the cyclic
collector frees, and a large prompt body lives on until it runs.
"""

from __future__ import annotations

import asyncio
import gc
import socket

from ankka._kernel.bounded import ConnectionLimits
from ankka.gateway.cycle import Cycle
from ankka.gateway.server import RawServer
from ankka.gateway.wire import WATCH_DISCONNECT, Receive, Scope, Send


def _cycles() -> int:
    return sum(1 for o in gc.get_objects() if type(o) is Cycle)


async def test_an_answered_request_is_freed_without_the_collector(collector_off: None) -> None:
    watched: list[bool] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        watched.append(scope.get(WATCH_DISCONNECT) is not None)
        while (await receive()).get("more_body"):
            pass
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
        )
        await send({"type": "http.response.body", "body": b"ok"})

    server = RawServer(app, limits=ConnectionLimits(), max_body=1 << 20)
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    serving = asyncio.create_task(server.serve(sock))
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = b"x" * 100_000
        for _ in range(2):  # two requests on one connection: the second replaces the first
            head = b"POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
            writer.write(head % len(body) + body)
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
            assert await reader.readexactly(2) == b"ok"
            for _ in range(3):
                await asyncio.sleep(0)  # the app's task finishes after its last send
        assert watched == [True, True]
        # The connection keeps its last request's cycle while it is open; the first is gone.
        assert _cycles() == 1
        writer.close()
        await writer.wait_closed()
    finally:
        server.stop()
        await serving
