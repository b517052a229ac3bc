"""Run an ASGI app on a socket bound before the server starts.

Shared by ``ankka serve``, ``ankka standin`` and ``ankka gateway``: binding first makes
``--port 0`` work (the kernel picks a free port and the line printed names it, which is how
tests and scripts find the server) and lets set-up errors surface before anything listens.
uvicorn is imported only when a server actually starts.

With ``ssl_context`` the server speaks TLS with that context (the gateway passes a
:class:`ankka._kernel.tls.ReloadingServerTLS` context, which requires client certificates), and
each request's scope carries the verified client certificate's URI SANs in
``scope["extensions"]["tls"]["peer_uri_sans"]`` (read once per connection, after the handshake),
which is how the gateway knows who is calling. uvicorn does not expose the peer certificate, so
its httptools protocol is extended here for that one field.

Every listener is bounded (:mod:`ankka._kernel.bounded`): head and body read timeouts, a head
size limit and a cap on connections, given as ``limits``.

Every connection's writes are gathered within one turn of the event loop and sent as one: uvicorn
writes a response's head and its body separately, which costs a second ``send`` system call per
answer (about a tenth of the gateway's CPU per request, docs/benchmarks.md). The head and body of
a whole answer now leave in one segment; a stream's chunks still leave as soon as they are made
(at the end of the loop turn that made them).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import logging
import os
import signal
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from ankka._kernel.admission import Admission
from ankka._kernel.bounded import ConnectionLimits, bounded_protocol
from ankka._kernel.drain import GRACE_SECONDS
from ankka._kernel.logs import say

__all__ = [
    "ConnectionLimits",
    "add_limit_options",
    "add_probe_budget",
    "probe_limits",
    "bind",
    "limits_from",
    "port_number",
    "run",
    "serve_forever",
]


def port_number(text: str) -> int:
    """An argparse ``type``: a TCP port, 0 (the kernel picks a free one) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 to 65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0 to 65535; 0 picks a free one)")
    return port


def add_limit_options(parser: argparse.ArgumentParser, *, env_prefix: str | None = None) -> None:
    """``--max-connections``, ``--header-timeout``, ``--body-timeout``, ``--max-header-bytes``,
    ``--max-handshakes``, ``--handshake-timeout``, ``--max-connections-per-source`` and
    ``--max-requests-per-caller``.

    With ``env_prefix`` each default can also come from ``<env_prefix><OPTION>``
    (e.g. ``ANKKA_GATEWAY_MAX_CONNECTIONS``), as the gateway's other options do.
    """
    defaults = ConnectionLimits()
    options = (
        ("--max-connections", int, defaults.max_connections, "N",
         "connections held at once; past it the oldest idle one is closed (503 when all are "
         "working on a request)"),
        ("--header-timeout", float, defaults.header_timeout_s, "SECONDS",
         "time a request's head may take to arrive; past it, 408"),
        ("--body-timeout", float, defaults.body_timeout_s, "SECONDS",
         "longest wait between two pieces of a request body; past it the connection closes"),
        ("--max-header-bytes", int, defaults.max_header_bytes, "N",
         "largest request head (request line and headers); past it, 431"),
        ("--max-handshakes", int, defaults.max_handshakes, "N",
         "TLS handshakes under way at once, counted from accept; past it the oldest handshake "
         "of the address holding the most is closed"),
        ("--handshake-timeout", float, defaults.handshake_timeout_s, "SECONDS",
         "time a TLS handshake may take; past it the connection closes"),
        ("--max-connections-per-source", int, defaults.max_connections_per_source, "N",
         "connections from one address, handshakes included; past it that address's oldest "
         "handshake is closed, or the newcomer"),
        ("--max-requests-per-caller", int, None, "N",
         "requests one caller may have in flight at once (streams included); past it, 429 "
         "(default: half of --max-connections); health paths are never counted"),
    )  # fmt: skip
    for flag, kind, value, metavar, meaning in options:
        variable = f"{env_prefix}{flag[2:].upper().replace('-', '_')}" if env_prefix else None
        found = os.environ.get(variable) if variable else None
        shown = " (%(default)s)" if value is not None else ""
        parser.add_argument(
            flag,
            type=kind,
            default=kind(found) if found else value,
            metavar=metavar,
            help=f"{meaning}{shown}" + (f"; env {variable}" if variable else ""),
        )


PROBE_MAX_CONNECTIONS = 32


def add_probe_budget(parser: argparse.ArgumentParser, flag: str, env: str | None = None) -> None:
    """``flag`` (``--probe-max-connections``, ``--health-max-connections``): the plain health
    port's own connection cap, apart from the API's, so neither can use up the other's."""
    found = os.environ.get(env) if env else None
    parser.add_argument(
        flag,
        type=int,
        default=int(found) if found else PROBE_MAX_CONNECTIONS,
        metavar="N",
        help="connections the health port holds at once, apart from the API's; past it the "
        "oldest still waiting for its request is closed (%(default)s)"
        + (f"; env {env}" if env else ""),
    )


def probe_limits(limits: ConnectionLimits, max_connections: int) -> ConnectionLimits:
    """The health port's bounds: the API's timeouts, its own connection cap."""
    try:
        return dataclasses.replace(limits, max_connections=max_connections)
    except ValueError as exc:
        raise SystemExit(f"health port: {exc}") from exc


def limits_from(args: argparse.Namespace) -> ConnectionLimits:
    """The limits :func:`add_limit_options` parsed; SystemExit naming a bad value."""
    try:
        return ConnectionLimits(
            max_connections=args.max_connections,
            header_timeout_s=args.header_timeout,
            body_timeout_s=args.body_timeout,
            max_header_bytes=args.max_header_bytes,
            max_handshakes=args.max_handshakes,
            max_connections_per_source=args.max_connections_per_source,
            handshake_timeout_s=args.handshake_timeout,
            max_requests_per_caller=args.max_requests_per_caller,
        )
    except ValueError as exc:
        raise SystemExit(f"connection limits: {exc}") from exc


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except (OSError, OverflowError) as exc:  # OverflowError: a port past 65535
        sock.close()
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SystemExit(f"cannot listen on {host}:{port}: {reason}") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


async def serve_forever(
    app: Any,
    sock: socket.socket,
    *,
    name: str,
    access_log: bool = False,
    timeout_keep_alive: int = 30,
    ssl_context: ssl.SSLContext | None = None,
    proxy_headers: bool = True,
    limits: ConnectionLimits | None = None,
    on_stop: Callable[[], None] | None = None,
) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM (or SIGINT); ``on_stop`` is called on the event
    loop as the server begins to stop (a :class:`~ankka._kernel.drain.Drain`'s ``stop``)."""
    import uvicorn

    host, port = sock.getsockname()[:2]
    scheme = "https" if ssl_context is not None else "http"
    protocol: type[Any] = _coalescing_protocol()
    limits = limits or ConnectionLimits()
    if ssl_context is not None:
        protocol = _tls_identity_protocol(protocol)
    bounded = bounded_protocol(protocol, limits)
    # uvicorn listens with ssl=None: the handshake is the admission's, counted from accept.
    admission = Admission(limits.admission(), ssl_context)
    extra: dict[str, Any] = {"http": lambda **kw: admission.gate(functools.partial(bounded, **kw))}
    config = uvicorn.Config(
        app,
        # uvicorn's loggers propagate to the root's one handler (ankka._kernel.logs), so its
        # lines, the access log's included, are in the command's format; its own handlers
        # and colours would bypass it.
        log_config=None,
        log_level="warning",
        access_log=access_log,
        lifespan="off",
        timeout_keep_alive=timeout_keep_alive,
        timeout_graceful_shutdown=GRACE_SECONDS,
        proxy_headers=proxy_headers,
        **extra,
    )
    if access_log:  # uvicorn's level above would hide its access lines (INFO)
        logging.getLogger("uvicorn.access").setLevel(logging.INFO)
    server = _server_class(uvicorn.Server, on_stop, asyncio.get_running_loop())(config)
    shown = f"[{host}]" if ":" in host else host
    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again under the handler
    # it found. Under the default disposition that kills the process before the caller's own
    # clean-up runs (closing the store, ending MCP sessions), so a handler of ours is in place
    # before the listening line is written: whoever reads that line may signal at once, before
    # serve() installs uvicorn's own handlers, and such a signal must stop the server (not kill
    # the process, and not be lost). Re-raised after a graceful stop, it finds the server
    # stopping already and does nothing, so serve() returns, the caller's ``finally`` runs and
    # the exit status is 0.
    previous = _stopping_at_sigterm(server)
    say(f"{name}: listening on {scheme}://{shown}:{port}")
    try:
        await server.serve(sockets=[sock])
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _server_class(
    base: type[Any], on_stop: Callable[[], None] | None, loop: asyncio.AbstractEventLoop
) -> type[Any]:
    """uvicorn's server, telling ``on_stop`` (on ``loop``) when a signal asks it to stop."""
    if on_stop is None:
        return base
    stop = on_stop

    class _Server(base):  # type: ignore[misc]
        def handle_exit(self, sig: int, frame: Any) -> None:
            if not self.should_exit:
                loop.call_soon_threadsafe(stop)  # a signal handler: not on the loop's turn
            super().handle_exit(sig, frame)

    return _Server


def _stopping_at_sigterm(server: Any) -> signal.Handlers | Callable[..., Any] | int | None:
    """Install a SIGTERM handler that asks ``server`` to stop; the handler it replaced is returned
    (``None`` off the main thread, where signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(sig: int, frame: Any) -> None:
        if not server.should_exit:
            server.handle_exit(sig, frame)

    return signal.signal(signal.SIGTERM, stop)


class _GatheringTransport:
    """A transport whose writes within one loop turn leave as one ``write`` at its end.

    Everything else goes to the real transport; ``close`` sends what is gathered first, so
    nothing written is lost, and the order of bytes is kept.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        if pending and not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _coalescing_protocol() -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol on a :class:`_GatheringTransport`."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class CoalescingProtocol(HttpToolsProtocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            gathering = _GatheringTransport(transport, asyncio.get_running_loop())
            super().connection_made(gathering)  # type: ignore[arg-type]

    return CoalescingProtocol


def _tls_identity_protocol(base: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
    """``base`` (uvicorn's httptools protocol), adding the client certificate's URI SANs to each
    scope."""
    from ankka._kernel.tls import peer_uri_sans

    class TLSIdentityProtocol(base):  # type: ignore[valid-type,misc]
        _tls_extension: dict[object, object] | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            # The application protocol is connected after the handshake: the peer is verified.
            peercert = transport.get_extra_info("peercert")
            self._tls_extension = {
                # Whether a (verified) client certificate was sent at all: a server that only
                # asks for one (CERT_OPTIONAL) then identifies the caller another way.
                "peer_certificate": bool(peercert),
                "peer_uri_sans": peer_uri_sans(peercert),
            }

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.scope["extensions"] = {"tls": self._tls_extension or {}}

    return TLSIdentityProtocol


def run(main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run ``main`` on uvloop when it is installed, on asyncio's loop otherwise."""
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    try:
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:
        pass
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(main())
    except KeyboardInterrupt:
        say("stopped", stream=sys.stderr)
        return 130
