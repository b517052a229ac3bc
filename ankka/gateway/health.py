"""A plain-HTTP port answering only /healthz, /readyz and /metrics.

With mTLS every connection without a platform client certificate is refused at the handshake,
which is what callers must meet, but kubelet's probes and a Prometheus scrape present no client
certificate. They get this second, read-only listener instead (``--health-port``): it serves the
same three answers as the main port (:meth:`ankka.gateway.app.Gateway.operations`) and nothing
else, so no model can be reached through it.

Deliberately tiny: one request per connection (``Connection: close``), GET only, a 64 KiB cap on
the request head. Started and stopped by ``ankka gateway`` (:mod:`ankka.gateway.cli`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from types import TracebackType

__all__ = ["HealthPort"]

Answer = Callable[[str], tuple[int, bytes, bytes]]
_REASONS = {200: b"OK", 404: b"Not Found", 405: b"Method Not Allowed", 503: b"Service Unavailable"}
_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class HealthPort:
    """``async with HealthPort(sock, answer)``: serves until the block ends."""

    def __init__(self, sock: socket.socket, answer: Answer) -> None:
        self._sock = sock
        self._answer = answer
        self._server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, _, rest = head.partition(b" ")
            target = rest.partition(b" ")[0].decode("latin-1").partition("?")[0]
            if method != b"GET":
                status, content_type, body = 405, b"text/plain", b"GET only\n"
            elif target not in _PATHS:
                status, content_type, body = 404, b"text/plain", b"/healthz, /readyz, /metrics\n"
            else:
                status, content_type, body = self._answer(target)
            writer.write(
                b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
                b"Connection: close\r\n\r\n%s"
                % (status, _REASONS.get(status, b""), content_type, len(body), body)
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # a probe that went away or sent nonsense: nothing to answer
        finally:
            writer.close()

    async def __aenter__(self) -> HealthPort:
        self._server = await asyncio.start_server(self._handle, sock=self._sock, limit=64 * 1024)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
