"""The gateway's own HTTP/1.1 server: httptools' parser on a raw asyncio protocol.

The gateway sits on every model call, and under uvicorn its generic ASGI layer (message
validation, a request-response cycle object with its events and flow control, header checks per
send) was about a fifth of the gateway's CPU per request (docs/benchmarks.md, "Where the
gateway's CPU goes"). This module is what replaces it: one protocol object per connection that
feeds httptools, builds the scope the gateway reads and runs each request as a
:class:`ankka.gateway.cycle.Cycle` (the body handed over whole; each answer written with
pre-built status lines, one ``write`` for a whole answer, a stream's chunks gathered within one
loop turn). The app it runs is :class:`ankka.gateway.app.Gateway`, called
with the ASGI convention unchanged (so the rare paths and the hot path are the same code, and
uvicorn remains a setting away: ``--server uvicorn``).

Every bound uvicorn and :mod:`ankka._kernel.bounded` gave is kept here:

- a request head must arrive within ``header_timeout_s`` (408), be at most
  ``max_header_bytes`` (431), and a body must keep arriving (``body_timeout_s`` between
  pieces; past it the connection closes and the app hears a disconnect);
- at most ``max_body`` bytes of a body are held; past it the rest is discarded, the app's own
  check answers (413), and the connection closes after the answer;
- connections are counted from accept, TLS handshakes included (:mod:`ankka._kernel.admission`:
  ``max_handshakes``, ``handshake_timeout_s``, ``max_connections_per_source``);
- ``max_connections`` per listener: a newcomer closes the oldest idle connection (one between
  requests, else one still sending its head), or gets 503 when every one is working, except
  that :data:`~ankka._kernel.bounded.HEALTH_RESERVE` more may each ask for one health path;
- one caller (named by its certificate; with plain HTTP, by its address) may have at most
  ``limits.caller_share`` requests in flight (429 past it); health paths are not counted;
- keep-alive (HTTP/1.1 by default, HTTP/1.0 when asked) with an idle timeout; pipelined
  requests are answered in order, reading paused while two wait; ``Expect: 100-continue``
  is answered before the body is read (not when the declared body passes ``max_body``);
- a request that cannot be parsed gets 400 in the gateway's error shape and the connection
  closes; a client that goes away (or half-closes) is a disconnect for the request in flight,
  which is how the gateway cancels its upstream request: told through the watch each scope
  carries (``scope[WATCH_DISCONNECT]``, :meth:`ankka.gateway.cycle.Cycle.watch`), so the
  gateway needs no second task per request waiting on ``receive`` for it;
- with TLS, each request's scope carries the verified client certificate's URI SANs in
  ``scope["extensions"]["tls"]["peer_uri_sans"]`` (read once per connection).

SIGTERM (and SIGINT) stop it gracefully: the listener closes, idle connections close, requests
in flight get ``grace_s`` to finish, then are cancelled. Started by ``ankka gateway``
(:mod:`ankka.gateway.cli`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import ssl
import threading
from collections import deque
from collections.abc import Coroutine
from typing import Any, cast
from urllib.parse import unquote

import httptools

from ankka._kernel.admission import Admission
from ankka._kernel.bounded import HEALTH_PATHS, HEALTH_RESERVE, ConnectionLimits, health_request
from ankka._kernel.identity import caller_name
from ankka._kernel.logs import say
from ankka._kernel.shares import CallerShares
from ankka._kernel.tls import peer_uri_sans
from ankka.gateway.cycle import App, Cycle, Dates, refusal
from ankka.gateway.wire import WATCH_DISCONNECT, Scope

__all__ = ["RawServer", "serve_raw"]

_IDLE, _HEAD, _BODY = 0, 1, 2  # where the parser is in the connection's next request
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_ASGI = {"version": "3.0", "spec_version": "2.3"}


_TIMEOUT = refusal(
    408, "the request head did not arrive in time; send it whole, promptly", "request_timeout"
)
_FULL = refusal(
    503,
    "the gateway holds as many connections as it may, all working; retry in a second",
    "too_many_connections",
    b"retry-after: 1\r\n",
)


def _past_share(share: int) -> bytes:
    return refusal(
        429,
        f"this caller has {share} requests in flight, its share of the gateway's connections; "
        "retry when one ends (--max-requests-per-caller sets the share)",
        "too_many_requests",
        b"retry-after: 1\r\n",
    )


def _too_large_head(limit: int) -> bytes:
    return refusal(
        431,
        f"the request head (request line and headers) is larger than {limit} bytes; "
        "send fewer or shorter headers",
        "request_header_too_large",
    )


def _malformed(why: str) -> bytes:
    return refusal(400, f"the request is not valid HTTP/1.1 ({why})", "invalid_http")


class _Gone(asyncio.Transport):
    """What a lost connection holds in place of its transport: closed, and holding nothing."""

    def is_closing(self) -> bool:
        return True

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def write(self, data: bytes | bytearray | memoryview) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


_GONE = _Gone()


class _Connection(asyncio.Protocol):
    """One client connection: parse, bound, dispatch in order, write."""

    def __init__(self, server: RawServer) -> None:
        self.server = server
        self.loop = server.loop
        self.limits = server.limits
        self.parser: httptools.HttpRequestParser | None = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport = None  # type: ignore[assignment]  # set on connect
        self.lost = False
        self.state = _IDLE
        self.since = 0.0
        self.head_bytes = 0
        self.served = 0
        self.timer: asyncio.TimerHandle | None = None
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.parsing: Cycle | None = None  # the request whose head or body is arriving
        self.last: Cycle | None = None  # the request parsed last
        self.active: Cycle | None = None  # the request being answered
        self.pipeline: deque[Cycle] = deque()
        self.reading_paused = False
        self.out: list[bytes] = []
        self.flush_handle: asyncio.Handle | None = None
        self.write_paused = False
        self.drain_waiter: asyncio.Future[None] | None = None
        self.extensions: dict[str, Any] = {}
        self.client: tuple[str, int] | None = None
        self.local: tuple[str, int] | None = None
        self.caller = ""  # whose share this connection's requests count against
        self.holds_share = False
        # A connection of the health reserve: its first bytes, until its request line is in.
        self.reserve: bytes | None = None
        self.once = False  # a reserve connection: one health request, then closed

    # connection events

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        self.transport = transport = cast(asyncio.Transport, transport)
        server = self.server
        server.connections[self] = None
        self.since = self.loop.time()
        self.client = _address(transport.get_extra_info("peername"))
        self.local = _address(transport.get_extra_info("sockname"))
        if server.tls:  # connected after the handshake: the peer is verified
            sans = peer_uri_sans(transport.get_extra_info("peercert"))
            self.extensions = {"tls": {"peer_uri_sans": sans}}
            self.caller = caller_name(sans)
        elif self.client is not None:  # plain HTTP: every caller is anonymous, so by address
            self.caller = self.client[0]
        cap = self.limits.max_connections
        if len(server.connections) > cap and server.open() > cap and not server.make_room(self):
            if server.open() > cap + HEALTH_RESERVE:
                transport.write(_FULL)
                transport.close()
                return
            self.reserve = b""
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.server.connections.pop(self, None)
        self._disarm()
        for cycle in (self.parsing, self.active, *self.pipeline):
            if cycle is not None:
                cycle.gone()
        self.pipeline.clear()
        self.out.clear()
        self.resume_writing()
        # Let go of what made the connection a reference cycle (its parser calls it back; its
        # last request points at it) and of its transport: a TLS transport holds a read buffer
        # and OpenSSL's state, which would otherwise wait for the cyclic collector, and dead
        # connections piling up between collections grew the heap (issue 31, item 10). The
        # request being answered lets go of it when its app returns (finished).
        self.parser = None
        self.parsing = self.last = None
        self.transport = _GONE
        if self.flush_handle is not None:
            self.flush_handle.cancel()
            self.flush_handle = None

    def data_received(self, data: bytes) -> None:
        if self.reserve is not None:
            head = self.reserve + data
            verdict = health_request(head)
            self.reserve = head if verdict is None else None
            if not verdict:
                if verdict is False:
                    self._refuse(_FULL)
                return
            self.once = True
            data = head
        if self.state == _BODY:
            self.since = self.loop.time()
        else:  # the head ends at the first blank line; what follows it is body
            end = data.find(b"\r\n\r\n")
            self.head_bytes += len(data) if end < 0 else end
            if self.head_bytes > self.limits.max_header_bytes:
                self._refuse(_too_large_head(self.limits.max_header_bytes))
                return
        parser = self.parser
        if parser is None:
            return  # lost: nothing more is read
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # No protocol switch is offered: the request parsed so far is answered as
            # HTTP/1.1, and the connection closes after it.
            if self.last is not None and self.last.message_done:
                self.last.keep_alive = False
                self._pause_reading()
            else:
                self._refuse(_malformed("an upgrade the gateway does not offer"))
        except httptools.HttpParserCallbackError as exc:
            self._refuse(_malformed(str(exc.__context__ or exc)))
        except httptools.HttpParserError as exc:
            self._refuse(_malformed(str(exc) or type(exc).__name__))

    def eof_received(self) -> bool | None:
        return None  # a half-closed client has left: close, and the request in flight hears it

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        waiter, self.drain_waiter = self.drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # httptools callbacks

    def on_message_begin(self) -> None:
        self.state = _HEAD
        self.since = self.loop.time()
        self.url = b""
        self.headers = []
        self._arm()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.state = _BODY
        self.head_bytes = 0
        self.since = self.loop.time()
        parser = self.parser
        assert parser is not None  # called by it
        headers = self.headers
        expect = False
        declared = 0
        for name, value in headers:
            if name == b"content-length":
                with contextlib.suppress(ValueError):
                    declared = int(value)
            elif name == b"expect":
                expect = value.lower() == b"100-continue"
        scope = self._scope(parser.get_method().decode("ascii"), parser.get_http_version())
        cycle = Cycle(
            self,
            scope,
            keep_alive=parser.should_keep_alive(),
            expect=expect and declared <= self.server.max_body,
        )
        scope[WATCH_DISCONNECT] = cycle.watch
        self.parsing = self.last = cycle
        if self.active is None:
            self._begin(cycle)
        else:  # pipelined: answered after the one before
            self.pipeline.append(cycle)
            # A keep-alive client often sends its next request as soon as the answer is out,
            # before the app has returned: one waiting request is read on; past it, reading
            # pauses, so a pipelining client cannot make the gateway hold unbounded requests.
            if len(self.pipeline) > 1:
                self._pause_reading()

    def on_body(self, body: bytes) -> None:
        cycle = self.parsing
        if cycle is None or cycle.over:
            return
        cycle.size += len(body)
        cycle.parts.append(body)
        if cycle.size > self.server.max_body:  # the app refuses it; the rest is dropped
            cycle.over = cycle.body_done = True
            cycle.wake()

    def on_message_complete(self) -> None:
        cycle = self.parsing
        self.parsing = None
        self.state = _IDLE
        self.since = self.loop.time()
        if cycle is not None:
            cycle.message_done = True
            if not cycle.over:
                cycle.body_done = True
                cycle.wake()

    # requests and answers

    def _scope(self, method: str, version: str) -> Scope:
        url = self.url
        if url.startswith(b"/") and b"?" not in url and b"%" not in url:
            raw_path, query = url, b""
        else:
            parsed = httptools.parse_url(url)  # HttpParserInvalidURLError: a 400
            raw_path, query = parsed.path or b"/", parsed.query or b""
        path = raw_path.decode("latin-1")
        if "%" in path:
            path = unquote(path)
        return {
            "type": "http",
            "asgi": _ASGI,
            "http_version": version,
            "method": method,
            "scheme": "https" if self.server.tls else "http",
            "path": path,
            "raw_path": raw_path,
            "query_string": query,
            "root_path": "",
            "headers": self.headers,
            "client": self.client,
            "server": self.local,
            "extensions": self.extensions,
        }

    def _begin(self, cycle: Cycle) -> None:
        if cycle.scope["path"] not in HEALTH_PATHS:
            if not self.server.shares.take(self.caller):
                self._refuse(_past_share(self.server.shares.share))
                return
            self.holds_share = True
        self.active = cycle
        if cycle.expect and not cycle.body_done:
            self.write(_CONTINUE)
        cycle.task = self.server.spawn(cycle.run(self.server.app))

    def answered(self, cycle: Cycle) -> None:
        """``cycle``'s answer is out: close the connection unless it is kept alive."""
        cycle.wake()
        if not cycle.keep_alive or self.lost or self.once:
            self.transport.close()

    def finished(self, cycle: Cycle) -> None:
        """``cycle``'s app returned: serve what is next on the connection.

        The next request waits for the app to return, not only for its answer to be out, so
        what the app does after answering (releasing the caller's slot) is done before the
        caller's next request on this connection is decided.
        """
        if self.active is cycle:
            self.active = None
            if self.holds_share:
                self.holds_share = False
                self.server.shares.give_back(self.caller)
        if self.lost or self.transport.is_closing():
            return
        self.served += 1
        self.since = self.loop.time()
        if self.pipeline:
            self._begin(self.pipeline.popleft())
            if len(self.pipeline) <= 1:
                self._resume_reading()
        else:
            self._arm()

    def _refuse(self, answer: bytes) -> None:
        """Answer a request the gateway cannot read (unless an answer is under way) and close."""
        if not self.transport.is_closing():
            if self.active is None:
                self.write(answer)
            self.transport.close()

    # writing

    def write(self, data: bytes) -> None:
        self.out.append(data)
        self.flush()

    def schedule_flush(self) -> None:
        if self.flush_handle is None:
            self.flush_handle = self.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Send what was gathered as one ``write``."""
        if self.flush_handle is not None:
            self.flush_handle.cancel()
            self.flush_handle = None
        out = self.out
        if out and not self.lost:
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))
        out.clear()

    async def drain(self) -> None:
        if self.write_paused and not self.lost:
            self.drain_waiter = self.loop.create_future()
            await self.drain_waiter

    def _pause_reading(self) -> None:
        if not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self.reading_paused:
            self.reading_paused = False
            self.transport.resume_reading()

    # time

    def _arm(self) -> None:
        if self.timer is None and not self.lost:
            self.timer = self.loop.call_later(self._limit(), self._expired)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _limit(self) -> float:
        if self.state == _BODY:
            return self.limits.body_timeout_s
        if self.state == _IDLE and self.served:
            return self.server.keep_alive_s
        return self.limits.header_timeout_s

    def _expired(self) -> None:
        """Checked against the last activity, so the hot path never re-arms a timer."""
        self.timer = None
        if self.lost or self.transport.is_closing():
            return
        if self.state == _IDLE and self.active is not None:
            return  # answering: re-armed when the answer is out
        if self.state == _BODY and self.reading_paused:
            self._arm()  # we stopped reading (pipelining), not the client
            return
        left = self.since + self._limit() - self.loop.time()
        if left > 0:
            self.timer = self.loop.call_later(max(left, 0.05), self._expired)
            return
        if self.state == _HEAD and self.active is None:
            self.write(_TIMEOUT)
        self.transport.close()

    def evictable(self) -> bool:
        return (
            self.active is None
            and not self.pipeline
            and self.state != _BODY
            and not self.transport.is_closing()
        )


def _address(value: Any) -> tuple[str, int] | None:
    if isinstance(value, tuple) and len(value) >= 2:
        return str(value[0]), int(value[1])
    return None


class RawServer:
    """Serves ``app`` on a bound socket until :meth:`stop`; owns every request's task."""

    def __init__(
        self,
        app: App,
        *,
        limits: ConnectionLimits,
        max_body: int,
        ssl_context: ssl.SSLContext | None = None,
        keep_alive_s: float = 30.0,
        grace_s: float = 10.0,
    ) -> None:
        self.app = app
        self.limits = limits
        self.max_body = max_body
        self.ssl_context = ssl_context
        self.tls = ssl_context is not None
        self.keep_alive_s = keep_alive_s
        self.grace_s = grace_s
        self.dates = Dates()
        self.shares = CallerShares(limits.caller_share)
        # Counts connections from accept; the TLS handshake is its, not the loop's.
        self.admission = Admission(limits.admission(), ssl_context)
        self.connections: dict[_Connection, None] = {}  # oldest first
        self.tasks: set[asyncio.Task[None]] = set()
        self.stopping = False
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # set in serve
        self._stop = asyncio.Event()  # set by stop(), even before serve() begins

    def spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = self.loop.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def open(self) -> int:
        """Connections not closing: a TLS connection closed by the gateway stays in
        ``connections`` until the client answers its close (or a timeout), holding no slot."""
        return sum(not conn.transport.is_closing() for conn in self.connections)

    def make_room(self, newcomer: _Connection) -> bool:
        """Close the oldest idle connection (one sending its head if none is idle)."""
        victim: _Connection | None = None
        best: tuple[bool, float] | None = None
        for other in self.connections:
            if other is newcomer or not other.evictable():
                continue
            key = (other.state != _IDLE, other.since)
            if best is None or key < best:
                victim, best = other, key
        if victim is None:
            return False
        victim.transport.close()
        return True

    def stop(self) -> None:
        self._stop.set()

    async def serve(self, sock: socket.socket) -> None:
        self.loop = asyncio.get_running_loop()
        admission = self.admission
        server = await self.loop.create_server(
            lambda: admission.gate(lambda: _Connection(self)), sock=sock, backlog=2048
        )
        try:
            await self._stop.wait()
        finally:
            await self._shut_down(server)

    async def _shut_down(self, server: asyncio.Server) -> None:
        self.stopping = True
        server.close()
        for conn in list(self.connections):
            if conn.active is None and not conn.pipeline:
                conn.transport.close()
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=self.grace_s)
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        for conn in list(self.connections):
            conn.transport.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await server.wait_closed()


async def serve_raw(
    app: App,
    sock: socket.socket,
    *,
    name: str,
    limits: ConnectionLimits,
    max_body: int,
    ssl_context: ssl.SSLContext | None = None,
) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM or SIGINT, announcing where it listens."""
    server = RawServer(app, limits=limits, max_body=max_body, ssl_context=ssl_context)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    scheme = "https" if ssl_context is not None else "http"
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT)
    handled = threading.current_thread() is threading.main_thread()
    if handled:
        for number in signals:
            loop.add_signal_handler(number, server.stop)
    # Announced once the handlers are in place: whoever reads the line may signal at once.
    say(f"{name}: listening on {scheme}://{shown}:{port}")
    try:
        await server.serve(sock)
    finally:
        if handled:
            for number in signals:
                loop.remove_signal_handler(number)
