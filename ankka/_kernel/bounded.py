"""Bounds on the connections a listener accepts: time, head size and how many at once.

Without them a connection that sends nothing, or stops mid-head or mid-body, stays open for
ever, and a few hundred such sockets exhaust the process's file descriptors, so real callers
are refused. :func:`bounded_protocol` extends uvicorn's httptools protocol (the one ``ankka
serve`` and the gateway's TLS port run on) with:

- a **head timeout**: a request's head (request line and headers) must arrive within
  ``header_timeout_s`` of the connection opening or of its first byte; past it the connection
  gets 408 (or is simply closed when it sent nothing);
- a **body timeout**: a request body must keep arriving, at most ``body_timeout_s`` between
  bytes (not counted while the server itself has paused reading);
- a **head size limit**: a head larger than ``max_header_bytes`` gets 431;
- a **connection cap** per listener: at ``max_connections``, a new connection closes the
  oldest one that is idle (between requests, or still sending its head) to make room, so a
  crowd of idle sockets cannot keep a real caller out; when every connection is working on a
  request the new one gets 503 with ``Retry-After``;
- a **health reserve** past the cap: when every connection is working, :data:`HEALTH_RESERVE`
  more are let in for one request each, answered only on a health path (/healthz, /readyz,
  /metrics; everything else 503), so a caller holding every slot does not blind the probes.

What is counted before a connection reaches the protocol (TLS handshakes, connections per
source address) is :mod:`ankka._kernel.admission`'s; how many requests one caller may have in
flight (``max_requests_per_caller``, a share of ``max_connections``) is the server's own.

Time is checked against the last activity when a timer fires, not by re-arming a timer per
chunk, so the hot path pays one timestamp per callback. uvicorn is imported only when a server
starts (``_kernel`` imports nothing heavy).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ankka._kernel.admission import AdmissionLimits

__all__ = [
    "HEALTH_PATHS",
    "HEALTH_RESERVE",
    "ConnectionLimits",
    "bounded_protocol",
    "health_request",
]

_IDLE, _HEAD, _BODY, _BUSY = "idle", "head", "body", "busy"


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What one listener allows. The defaults keep a listener far below a 1,024 fd limit."""

    max_connections: int = 512
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_header_bytes: int = 64 * 1024
    max_handshakes: int = 256
    max_connections_per_source: int = 256
    handshake_timeout_s: float = 10.0
    # None: half of max_connections (at least 1).
    max_requests_per_caller: int | None = None

    def __post_init__(self) -> None:
        if self.max_connections < 1 or self.max_header_bytes < 1:
            raise ValueError("max_connections and max_header_bytes must be at least 1")
        if self.header_timeout_s <= 0 or self.body_timeout_s <= 0:
            raise ValueError("the header and body timeouts must be positive")
        if self.max_requests_per_caller is not None and self.max_requests_per_caller < 1:
            raise ValueError("max_requests_per_caller must be at least 1")
        self.admission()  # its own checks

    def admission(self) -> AdmissionLimits:
        return AdmissionLimits(
            max_handshakes=self.max_handshakes,
            max_connections_per_source=self.max_connections_per_source,
            handshake_timeout_s=self.handshake_timeout_s,
        )

    @property
    def caller_share(self) -> int:
        """Requests one caller may have in flight at once on this listener."""
        if self.max_requests_per_caller is not None:
            return self.max_requests_per_caller
        return max(1, self.max_connections // 2)


# Connections let in past max_connections when every one is working, for a health path only.
HEALTH_RESERVE = 8
HEALTH_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
_HEALTH_TARGETS = frozenset(path.encode() for path in HEALTH_PATHS)


def health_request(head: bytes) -> bool | None:
    """Whether the request whose first bytes are ``head`` is a GET of a health path; None
    while its request line is still arriving."""
    end = head.find(b"\r\n")
    if end < 0:
        return None if len(head) < 4096 else False
    method, _, rest = head[:end].partition(b" ")
    target = rest.partition(b" ")[0].partition(b"?")[0]
    return method == b"GET" and target in _HEALTH_TARGETS


def _answer(status: bytes, extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-length: 0\r\nconnection: close\r\n" + extra + b"\r\n"
    )


_TIMEOUT = _answer(b"408 Request Timeout")
_TOO_LARGE = _answer(b"431 Request Header Fields Too Large")
_FULL = _answer(b"503 Service Unavailable", b"retry-after: 1\r\n")


def bounded_protocol(base: type[Any], limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """``base`` (uvicorn's ``HttpToolsProtocol`` or a subclass) with ``limits`` enforced."""

    class Bounded(base):  # type: ignore[misc]
        _ankka_state = _IDLE
        _ankka_since = 0.0
        _ankka_head_bytes = 0
        _ankka_timer: asyncio.TimerHandle | None = None
        # A connection of the health reserve: its first bytes, until its request line is in.
        _ankka_reserve: bytes | None = None
        _ankka_once = False

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._ankka_since = self.loop.time()
            cap = limits.max_connections
            if len(self.connections) > cap and self._open() > cap and not self._make_room():
                if self._open() > cap + HEALTH_RESERVE:
                    transport.write(_FULL)
                    transport.close()
                    return
                self._ankka_reserve = b""
            self._arm(limits.header_timeout_s)

        def _reserved(self, data: bytes) -> bytes | None:
            """What a reserve connection may pass on to the parser (None: nothing yet)."""
            head = (self._ankka_reserve or b"") + data
            verdict = health_request(head)
            if verdict is None:
                self._ankka_reserve = head
                return None
            self._ankka_reserve = None
            if not verdict:
                self.transport.write(_FULL)
                self.transport.close()
                return None
            self._ankka_once = True
            return head

        def _open(self) -> int:
            """Connections not closing (a TLS one waits for the client's close a while)."""
            return sum(not other.transport.is_closing() for other in self.connections)

        def _make_room(self) -> bool:
            """Close the oldest idle connection (one sending its head if none is idle)."""
            victim = None
            for other in self.connections:
                if other is self or not isinstance(other, Bounded) or not other._evictable():
                    continue
                key = (other._ankka_state != _IDLE, other._ankka_since)
                if victim is None or key < (victim._ankka_state != _IDLE, victim._ankka_since):
                    victim = other
            if victim is None:
                return False
            victim.transport.close()
            return True

        def _evictable(self) -> bool:
            if self._ankka_state not in (_IDLE, _HEAD) or self.transport.is_closing():
                return False
            return self.cycle is None or bool(self.cycle.response_complete)

        def _arm(self, seconds: float) -> None:
            if self._ankka_timer is None:
                self._ankka_timer = self.loop.call_later(seconds, self._expired)

        def _disarm(self) -> None:
            if self._ankka_timer is not None:
                self._ankka_timer.cancel()
                self._ankka_timer = None

        def _expired(self) -> None:
            self._ankka_timer = None
            state = self._ankka_state
            if state == _BUSY or self.transport.is_closing():
                return
            limit = limits.body_timeout_s if state == _BODY else limits.header_timeout_s
            left = self._ankka_since + limit - self.loop.time()
            if left > 0 or (state == _BODY and self.flow.read_paused):
                self._arm(max(left, 0.05) if left > 0 else limit)
                return
            if state == _HEAD:
                self.transport.write(_TIMEOUT)
            elif state == _IDLE and self.cycle is not None:
                return  # between requests: uvicorn's keep-alive timeout governs
            self.transport.close()

        def data_received(self, data: bytes) -> None:
            if self._ankka_reserve is not None:
                passed = self._reserved(data)
                if passed is None:
                    return
                data = passed
            state = self._ankka_state
            if state == _BODY:
                self._ankka_since = self.loop.time()
            elif state != _BUSY:
                # The head ends at the first blank line; what follows it is body.
                end = data.find(b"\r\n\r\n")
                self._ankka_head_bytes += len(data) if end < 0 else end
                if self._ankka_head_bytes > limits.max_header_bytes:
                    self.transport.write(_TOO_LARGE)
                    self.transport.close()
                    return
            super().data_received(data)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._ankka_state = _HEAD
            self._ankka_since = self.loop.time()
            self._arm(limits.header_timeout_s)

        def on_headers_complete(self) -> None:
            self._ankka_state = _BODY
            self._ankka_head_bytes = 0
            self._ankka_since = self.loop.time()
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._ankka_state = _BUSY
            self._disarm()
            super().on_message_complete()

        def on_response_complete(self) -> None:
            self._ankka_state = _IDLE
            self._ankka_since = self.loop.time()
            super().on_response_complete()
            if self._ankka_once:  # a reserve connection serves one health request
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return Bounded
