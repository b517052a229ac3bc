"""A plain-HTTP port answering only a few read-only paths (/healthz, /readyz, /metrics).

With mTLS every connection without a platform client certificate is refused at the handshake,
which is what callers must meet, but kubelet's probes and a Prometheus scrape present no client
certificate. They get this second, read-only listener instead: the gateway's ``--health-port``
(/healthz, /readyz, /metrics, the same answers as its main port:
:meth:`ankka.gateway.app.Gateway.operations`) and the runtime's ``--probe-port`` (/healthz and
/readyz only). Nothing else is served, so no model, session or task can be reached through it.

Deliberately tiny: one request per connection (``Connection: close``), GET only, a 64 KiB cap on
the request head. Bounded like every listener (:class:`ankka._kernel.bounded.ConnectionLimits`):
a head must arrive within the header timeout, and past ``max_connections`` a new connection
closes the oldest one still waiting for its head, so idle sockets cannot keep a probe out.
Started and stopped by ``ankka gateway`` (:mod:`ankka.gateway.cli`) and ``ankka serve``
(:mod:`ankka.runtime.serve.cli`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Iterable
from types import TracebackType

from ankka._kernel.bounded import ConnectionLimits

__all__ = ["OPERATIONS", "HealthPort"]

Answer = Callable[[str], tuple[int, bytes, bytes]]
_REASONS = {200: b"OK", 404: b"Not Found", 405: b"Method Not Allowed", 503: b"Service Unavailable"}
OPERATIONS = ("/healthz", "/readyz", "/metrics")


class HealthPort:
    """``async with HealthPort(sock, answer)``: serves ``paths`` until the block ends."""

    def __init__(
        self,
        sock: socket.socket,
        answer: Answer,
        *,
        limits: ConnectionLimits | None = None,
        paths: Iterable[str] = OPERATIONS,
    ) -> None:
        self._sock = sock
        self._answer = answer
        self._paths = tuple(paths)
        self._not_found = (", ".join(self._paths) + "\n").encode()
        self._limits = limits or ConnectionLimits()
        self._server: asyncio.Server | None = None
        # Connections still waiting for their head, oldest first (dicts keep insertion order).
        self._waiting: dict[asyncio.StreamWriter, None] = {}
        self._open = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open += 1
        if self._open > self._limits.max_connections and self._waiting:
            oldest = next(iter(self._waiting))
            del self._waiting[oldest]
            oldest.close()
        self._waiting[writer] = None
        try:
            async with asyncio.timeout(self._limits.header_timeout_s):
                head = await reader.readuntil(b"\r\n\r\n")
            self._waiting.pop(writer, None)
            method, _, rest = head.partition(b" ")
            target = rest.partition(b" ")[0].decode("latin-1").partition("?")[0]
            allow = b""
            if method != b"GET":
                status, content_type, body = 405, b"text/plain", b"GET only\n"
                allow = b"Allow: GET\r\n"
            elif target not in self._paths:
                status, content_type, body = 404, b"text/plain", self._not_found
            else:
                status, content_type, body = self._answer(target)
            writer.write(
                b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
                b"%sConnection: close\r\n\r\n%s"
                % (status, _REASONS.get(status, b""), content_type, len(body), allow, body)
            )
            await writer.drain()
        except (
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ConnectionError,
            TimeoutError,
        ):
            pass  # a probe that went away, sent nonsense or nothing in time: nothing to answer
        finally:
            self._open -= 1
            self._waiting.pop(writer, None)
            writer.close()

    async def __aenter__(self) -> HealthPort:
        self._server = await asyncio.start_server(
            self._handle, sock=self._sock, limit=self._limits.max_header_bytes
        )
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
