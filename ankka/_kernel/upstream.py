"""ankka's lean HTTP/1.1 client: pooled keep-alive connections, streamed bodies.

Shared by the gateway (its upstream client, :mod:`ankka.gateway.forward`) and the runtime (the
transport under the vendors' SDKs, :mod:`ankka.runtime.providers.lean_http`): both sit on every
model call. Measured on the benchmark's machine an ``httpx.AsyncClient`` request through its
default transport (httpcore, h11, anyio) cost about 1.2 ms of CPU (aiohttp about 0.3 ms), more
than a whole stand-in answer. This client does only what a model call needs (send a request,
read the status and headers, hand the body on chunk by chunk) over asyncio protocols, at a
small fraction of that cost.

The response parser is handed in (``Pool(parser=httptools.HttpResponseParser)``): this package
imports nothing heavy (``.importlinter``), so the deployables, which declare httptools, bring it.

Failures are translated here, once: :class:`ConnectFailed` (the server cannot be reached; its
subclass :class:`ConnectTimedOut` when connecting took too long), :class:`UpstreamTimeout` (no
byte within the read timeout), :class:`ProtocolFailure` (anything else). Timeouts are timer
callbacks, not ``wait_for`` tasks (one per connection, re-armed only when it fires), so an idle
wait costs nothing. Closing a :class:`Response` early (a caller left) closes its connection,
which the server sees as a cancelled request; a response read to its end returns its
connection to the pool.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

from ankka._kernel.errors import DependencyFailed

__all__ = [
    "AnswerTooLarge",
    "ConnectFailed",
    "ConnectTimedOut",
    "Endpoint",
    "Pool",
    "Origin",
    "ProtocolFailure",
    "Response",
    "ResponseParser",
    "UpstreamError",
    "UpstreamTimeout",
]

_HIGH_WATER = 256 * 1024  # buffered body bytes before the server is asked to wait


class UpstreamError(DependencyFailed):
    """The upstream exchange failed; subclasses say how. ``forward`` answers it in OpenAI's
    error shape, naming the model; whoever serves that model must act."""

    kind = "upstream_error"
    status = 502


class ConnectFailed(UpstreamError):
    pass


class ConnectTimedOut(ConnectFailed):
    pass


class UpstreamTimeout(UpstreamError):
    pass


class ProtocolFailure(UpstreamError):
    pass


class AnswerTooLarge(UpstreamError):
    """A whole (non-stream) answer larger than the gateway buffers."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer is larger than {limit} bytes")
        self.limit = limit


class _StaleConnection(UpstreamError):
    """A pooled connection the server had closed; the request is retried on a new one."""


class ResponseParser(Protocol):
    """What the client needs of an HTTP/1.1 response parser (httptools' has it). It is built
    with the connection, whose ``on_header``, ``on_headers_complete``, ``on_body`` and
    ``on_message_complete`` it calls; ``feed_data`` raises on malformed HTTP."""

    def feed_data(self, data: bytes) -> None: ...

    def get_status_code(self) -> int: ...

    def should_keep_alive(self) -> bool: ...


ParserFactory = Callable[[Any], ResponseParser]

Origin = tuple[str, int, bool]
"""Where connections go and are pooled: (host, port, tls)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a request goes, parsed once per model rather than once per request."""

    host: str
    port: int
    tls: bool
    path: str
    # The request line and fixed headers, each ending in CRLF (Content-Length follows). It
    # holds the bearer key, so it is kept out of repr() and therefore out of any log line.
    head: bytes = field(repr=False)

    @classmethod
    def of(cls, url: str, *, bearer: str) -> Endpoint:
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if tls else 80)
        path = parts.path or "/"
        host_header = host if parts.port is None else f"{host}:{port}"
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host_header}\r\n"
            f"Content-Type: application/json\r\nAuthorization: Bearer {bearer}\r\n"
        ).encode("latin-1")
        return cls(host, port, tls, path, head)


class _Connection(asyncio.Protocol):
    def __init__(self, pool: Pool, key: Origin) -> None:
        self.pool = pool
        self.key = key
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = pool._parser(self)
        self.closed = False
        self.reused = False
        # One timer per connection, re-armed lazily: see wait().
        self.timer: asyncio.TimerHandle | None = None
        self.due = 0.0  # when the timer fires (loop time)
        self.deadline = 0.0  # when the wait under way times out (loop time)
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.received_any = False
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.paused = False
        self.error: UpstreamError | None = None
        self.waiter: asyncio.Future[None] | None = None

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.received_any = True
        try:
            self.parser.feed_data(data)
        except Exception as exc:  # the parser's own error type (httptools: HttpParserError)
            self._fail(ProtocolFailure(f"the server sent malformed HTTP: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not self.complete and self.error is None and exc is None and self._delimited_by_close():
            self.complete = True  # HTTP/1.0 framing: the body ends where the connection does
        elif not self.complete and self.error is None:
            if not self.received_any and self.reused:
                self._fail(_StaleConnection("the pooled connection was closed by the server"))
            else:
                self._fail(ProtocolFailure("the server closed the connection mid-answer"))
        self._wake()

    def _delimited_by_close(self) -> bool:
        """An answer whose headers arrived with neither a length nor chunked framing."""
        if not self.headers_done:
            return False
        names = {name for name, _ in self.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.headers_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > _HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        # Asked here: after this callback the parser has reset and always answers False.
        self.keep_alive = self.parser.should_keep_alive()
        self.complete = True
        self._wake()

    # waiting, with a timer instead of a task
    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: UpstreamError) -> None:
        if self.error is None:
            self.error = error
        self._wake()
        if self.transport is not None:
            self.transport.close()

    def _on_timer(self) -> None:
        self.timer = None
        if self.waiter is None or self.closed:
            return  # nobody waits: the next wait arms it again
        left = self.deadline - self.loop.time()
        if left > 0:  # the wait under way began after the timer was armed
            self.due = self.deadline
            self.timer = self.loop.call_at(self.deadline, self._on_timer)
            return
        self._fail(UpstreamTimeout("no answer within the read timeout"))

    async def wait(self, seconds: float) -> None:
        # A timer callback, not asyncio.timeout: this runs once per body chunk. The timer is
        # armed once and checked against the wait under way when it fires, instead of made
        # and cancelled for every wait; each wait still times out ``seconds`` after it began.
        self.waiter = waiter = self.loop.create_future()
        self.deadline = deadline = self.loop.time() + seconds
        timer = self.timer
        if timer is None or self.due > deadline:
            if timer is not None:
                timer.cancel()
            self.due = deadline
            self.timer = self.loop.call_at(deadline, self._on_timer)
        try:
            await waiter
        finally:
            self.waiter = None
        if self.error is not None:
            raise self.error

    def take(self) -> bytes:
        chunk = self.chunks.popleft()
        self.buffered -= len(chunk)
        if self.paused and self.buffered < _HIGH_WATER // 2 and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return chunk

    def close(self) -> None:
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.transport is not None:
            self.transport.close()


class Response:
    """An upstream answer whose body is still arriving. Always ``close()`` it."""

    def __init__(self, connection: _Connection, read_timeout: float) -> None:
        self._connection = connection
        self._timeout = read_timeout
        self.status = connection.status
        self.headers = connection.headers
        self._released = False

    def header(self, name: bytes, default: bytes = b"") -> bytes:
        for key, value in self.headers:
            if key == name:
                return value
        return default

    async def chunks(self) -> AsyncIterator[bytes]:
        connection = self._connection
        while True:
            if connection.chunks:
                yield connection.take()
            elif connection.complete:
                return
            elif connection.error is not None:
                raise connection.error
            else:
                await connection.wait(self._timeout)

    async def read(self, *, limit: int | None = None) -> bytes:
        """The whole body; :class:`AnswerTooLarge` as soon as it is known to pass ``limit``."""
        declared = self.header(b"content-length")
        if limit is not None and declared.isdigit() and int(declared) > limit:
            raise AnswerTooLarge(limit)
        connection = self._connection
        if connection.complete:  # the usual case: the whole answer came with its head
            chunks = connection.chunks
            if limit is not None and connection.buffered > limit:
                raise AnswerTooLarge(limit)
            whole = chunks.popleft() if len(chunks) == 1 else b"".join(chunks)
            chunks.clear()
            connection.buffered = 0
            if connection.paused and connection.transport is not None:
                connection.paused = False
                connection.transport.resume_reading()
            return whole
        parts: list[bytes] = []
        total = 0
        async for chunk in self.chunks():
            total += len(chunk)
            if limit is not None and total > limit:
                raise AnswerTooLarge(limit)
            parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close(self) -> None:
        """Return the connection to the pool if the answer was read whole, else close it."""
        if self._released:
            return
        self._released = True
        connection = self._connection
        if connection.complete and connection.keep_alive and not connection.closed:
            connection.pool._give_back(connection)
        else:
            connection.close()


class Pool:
    """Keep-alive connections per (host, port, tls); as many as there are requests in flight.

    ``tls`` is the context for ``https`` origins (a client certificate's, for mTLS); without
    one, the system's default trust is used."""

    def __init__(
        self, *, parser: ParserFactory, tls: ssl.SSLContext | None = None, max_idle: int = 256
    ) -> None:
        self._parser = parser
        self._idle: dict[Origin, list[_Connection]] = {}
        self._max_idle = max_idle
        self._tls = tls
        self._closed = False

    async def _connect(self, key: Origin, seconds: float) -> _Connection:
        host, port, tls = key
        if tls and self._tls is None:
            self._tls = ssl.create_default_context()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(seconds):
                _, protocol = await loop.create_connection(
                    lambda: _Connection(self, key),
                    host,
                    port,
                    ssl=self._tls if tls else None,
                )
        except TimeoutError as exc:
            raise ConnectTimedOut(f"connecting to {host}:{port} took over {seconds:g}s") from exc
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from exc
        return protocol

    def _take_idle(self, key: Origin) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            transport = connection.transport
            if not connection.closed and transport is not None and not transport.is_closing():
                return connection
        return None

    def _give_back(self, connection: _Connection) -> None:
        idle = self._idle.setdefault(connection.key, [])
        if self._closed or len(idle) >= self._max_idle:
            connection.close()
            return
        connection.reused = True
        connection._reset()
        idle.append(connection)

    async def post(
        self,
        endpoint: Endpoint,
        body: bytes,
        *,
        connect_timeout: float,
        read_timeout: float,
        headers: bytes = b"",
    ) -> Response:
        """Send ``body``; answer once the status and headers have arrived. ``headers`` are
        more header lines, each ending in CRLF (the trace context, when tracing is on)."""
        payload = b"".join(
            (
                endpoint.head,
                headers,
                b"Content-Length: ",
                str(len(body)).encode(),
                b"\r\n\r\n",
                body,
            )
        )
        return await self.send(
            (endpoint.host, endpoint.port, endpoint.tls),
            payload,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )

    async def send(
        self, origin: Origin, payload: bytes, *, connect_timeout: float, read_timeout: float
    ) -> Response:
        """Write ``payload`` (a whole HTTP/1.1 request: head and body) to a connection to
        ``origin``; answer once the status and headers have arrived."""
        for _ in range(2):
            connection = self._take_idle(origin) or await self._connect(origin, connect_timeout)
            try:
                assert connection.transport is not None
                connection.transport.write(payload)
                while not connection.headers_done:
                    await connection.wait(read_timeout)
            except _StaleConnection:
                continue  # the server closed it while idle; the request was not seen
            except BaseException:
                connection.close()
                raise
            return Response(connection, read_timeout)
        raise ProtocolFailure("the server closed two connections in a row before answering")

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()
