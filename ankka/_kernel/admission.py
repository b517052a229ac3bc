"""Connections counted from accept, before any TLS handshake: how many, and from where.

A listener that hands TLS to the event loop (``create_server(ssl=...)``) sees a connection only
once its handshake is done, and the loop waits 60 s for a handshake by default: a crowd of
sockets that connect and never send a ClientHello holds one file descriptor each, unseen by
every cap above it, until the process runs out and real callers (and a probe port in the same
process) are refused (issue 31, item 6). A listener whose factory returns
:meth:`Admission.gate` counts each connection the moment it is accepted:

- a TLS handshake must finish within ``handshake_timeout_s`` (10 s by default);
- at most ``max_handshakes`` handshakes are under way at once; past it the oldest connection
  that has sent nothing yet, of the source holding the most such, is closed (when every one has
  sent something, the oldest handshake of the source holding the most): a crowd that never
  sends a ClientHello cannot push out a client's handshake, nor one source another's;
- at most ``max_connections_per_source`` connections from one address (handshakes and
  established connections alike); past it that address's oldest handshake is closed, or, when
  it has none, the newcomer is.

The handshake runs in the loop's own TLS protocol (asyncio's or uvloop's ``SSLProtocol``, put
on the socket by the gate, with the first bytes it read, rather than by the loop), and the
connection's own protocol (uvicorn's, the gateway's) is connected after it exactly as with
``create_server(ssl=...)``.
Bookkeeping plus one small protocol; standard library only (uvloop when it runs the loop).
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

__all__ = ["Admission", "AdmissionLimits"]

log = logging.getLogger("ankka.admission")

try:
    import uvloop.loop

    _UVLOOP_TLS: Callable[..., asyncio.BaseProtocol] | None = getattr(uvloop.loop, "SSLProtocol")  # noqa: B009
except ImportError:  # uvloop is optional: asyncio's loop then runs the server
    _UVLOOP_TLS = None


@dataclass(frozen=True, slots=True)
class AdmissionLimits:
    """What a listener admits before a connection's own protocol sees it."""

    max_handshakes: int = 256
    max_connections_per_source: int = 256
    handshake_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if self.max_handshakes < 1 or self.max_connections_per_source < 1:
            raise ValueError("max_handshakes and max_connections_per_source must be at least 1")
        if self.handshake_timeout_s <= 0:
            raise ValueError("the handshake timeout must be positive")


def _tls_protocol_class(loop: asyncio.AbstractEventLoop) -> Callable[..., asyncio.BaseProtocol]:
    """The loop's own TLS protocol: what ``create_server(ssl=...)`` would put on the socket.

    Made by hand (rather than through ``loop.start_tls``, which is a coroutine) so it is on the
    socket before the loop's first read of it: uvloop starts reading right after
    ``connection_made``, and a ClientHello read by anything else is lost. asyncio's and uvloop's
    classes take the same arguments.
    """
    if _UVLOOP_TLS is not None and type(loop).__module__.startswith("uvloop"):
        return _UVLOOP_TLS
    return cast(Callable[..., asyncio.BaseProtocol], asyncio.sslproto.SSLProtocol)


class _Gate(asyncio.Protocol):
    """One accepted connection until its own protocol (or the loop's TLS one) takes over."""

    def __init__(self, admission: Admission, make: Callable[[], asyncio.Protocol]) -> None:
        self.admission = admission
        self.make = make
        self.source = ""
        self.raw: asyncio.Transport | None = None
        self.inner: asyncio.Protocol | None = None  # until its handshake is done
        self.counted = False
        self.silent = False  # a TLS connection that has sent nothing yet
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        raw = self.raw = cast(asyncio.Transport, transport)
        peer = raw.get_extra_info("peername")
        self.source = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        admission = self.admission
        if not admission.admit(self):
            raw.abort()
            return
        if admission.ssl_context is None:
            inner = self.make()
            _release_when_lost(inner, self)
            raw.set_protocol(inner)
            inner.connection_made(raw)
            return
        # Silent until its first byte: the TLS protocol starts with the ClientHello, and a
        # silent connection is the first to go when room is needed.
        self.silent = True
        self.timer = asyncio.get_running_loop().call_later(
            admission.limits.handshake_timeout_s, self.evict
        )

    def data_received(self, data: bytes) -> None:
        """The first bytes of a TLS connection: hand it, and them, to the loop's TLS protocol."""
        admission = self.admission
        if not self.silent or self.raw is None or admission.ssl_context is None:
            return
        self.silent = False
        left = admission.limits.handshake_timeout_s
        if self.timer is not None:
            left = max(0.1, self.timer.when() - asyncio.get_running_loop().time())
            self.timer.cancel()
            self.timer = None
        inner = self.inner = self.make()
        _release_when_lost(inner, self)
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        tls = _tls_protocol_class(loop)(
            loop, inner, admission.ssl_context, waiter, server_side=True,
            ssl_handshake_timeout=left,
        )  # fmt: skip
        waiter.add_done_callback(self._shaken)
        self.raw.set_protocol(tls)
        tls.connection_made(self.raw)
        _feed(cast(asyncio.BufferedProtocol, tls), data)

    def _shaken(self, waiter: asyncio.Future[None]) -> None:
        if waiter.cancelled() or waiter.exception() is not None:
            exc = None if waiter.cancelled() else waiter.exception()
            log.debug("TLS handshake from %s failed: %r", self.source, exc)
            if self.raw is not None:
                self.raw.abort()
            _forget(self.inner)
            self.inner = None
            self.admission.release(self)
        else:
            self.inner = None
            self.admission.established(self)

    def connection_lost(self, exc: Exception | None) -> None:
        # Only while this gate is the socket's protocol: a TLS connection that sent nothing.
        self._stop_timer()
        self.admission.release(self)

    def evict(self) -> None:
        self._stop_timer()
        if self.raw is not None:
            self.raw.abort()
        self.admission.release(self)

    def _stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


def _feed(protocol: asyncio.BufferedProtocol, data: bytes) -> None:
    """Give ``data`` to a buffered protocol as the transport would have."""
    view = memoryview(data)
    while view:
        buffer = memoryview(protocol.get_buffer(len(view)))
        size = min(len(buffer), len(view))
        buffer[:size] = view[:size]
        protocol.buffer_updated(size)
        view = view[size:]


def _release_when_lost(inner: asyncio.Protocol, gate: _Gate) -> None:
    """``inner.connection_lost`` also gives the connection's place back (the TLS protocol
    tells ``inner`` only once it connected it; a failed handshake is the gate's)."""
    lost = inner.connection_lost

    def connection_lost(exc: Exception | None) -> None:
        try:
            lost(exc)
        finally:
            _forget(inner)
            gate.admission.release(gate)

    setattr(inner, "connection_lost", connection_lost)  # noqa: B010  # on this instance only


def _forget(inner: asyncio.Protocol | None) -> None:
    """Drop the wrapper :func:`_release_when_lost` set: it refers to ``inner``, a reference
    cycle that would leave every closed connection to the cyclic collector."""
    if inner is not None:
        vars(inner).pop("connection_lost", None)


class Admission:
    """The connections one listener holds, from accept: total handshakes and per source."""

    def __init__(self, limits: AdmissionLimits, ssl_context: ssl.SSLContext | None) -> None:
        self.limits = limits
        self.ssl_context = ssl_context
        self.handshakes: dict[_Gate, None] = {}  # oldest first
        self.per_source: dict[str, int] = {}
        self.refused = 0
        self.evicted = 0

    def gate(self, make: Callable[[], Any]) -> asyncio.Protocol:
        """The protocol for one accepted connection (a listener's factory returns it, on a
        server created with ``ssl=None``): it admits the connection, then hands it to
        ``make``'s protocol, over TLS when this admission has a context."""
        return _Gate(self, make)

    def admit(self, gate: _Gate) -> bool:
        """Count ``gate``'s connection; False when it must be closed at once."""
        source = gate.source
        if self.per_source.get(source, 0) >= self.limits.max_connections_per_source:
            oldest = self._oldest_handshake(source)
            if oldest is None:
                self.refused += 1
                return False
            self._evict(oldest)
        if self.ssl_context is not None and len(self.handshakes) >= self.limits.max_handshakes:
            self._evict(self._crowded_handshake())
        self.per_source[source] = self.per_source.get(source, 0) + 1
        gate.counted = True
        if self.ssl_context is not None:
            self.handshakes[gate] = None
        return True

    def established(self, gate: _Gate) -> None:
        self.handshakes.pop(gate, None)

    def release(self, gate: _Gate) -> None:
        """Give ``gate``'s place back (once, however many ways its end is heard)."""
        if not gate.counted:
            return
        gate.counted = False
        self.handshakes.pop(gate, None)
        left = self.per_source.get(gate.source, 0) - 1
        if left > 0:
            self.per_source[gate.source] = left
        else:
            self.per_source.pop(gate.source, None)

    def _evict(self, gate: _Gate) -> None:
        self.evicted += 1
        gate.evict()

    def _oldest_handshake(self, source: str) -> _Gate | None:
        """``source``'s oldest silent connection, else its oldest handshake."""
        mine = [g for g in self.handshakes if g.source == source]
        return next((g for g in mine if g.silent), mine[0] if mine else None)

    def _crowded_handshake(self) -> _Gate:
        """The oldest silent connection of the source with the most, else the oldest
        handshake of the source with the most under way: a client that sends its ClientHello
        at once is not pushed out by a crowd that sends nothing."""
        silent = [g for g in self.handshakes if g.silent]
        pool = silent or list(self.handshakes)
        counts: dict[str, int] = {}
        for gate in pool:
            counts[gate.source] = counts.get(gate.source, 0) + 1
        crowded = max(counts, key=counts.__getitem__)
        return next(g for g in pool if g.source == crowded)
