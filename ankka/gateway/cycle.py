"""One request and its answer on the gateway's own HTTP/1.1 server (:mod:`ankka.gateway.server`).

A :class:`Cycle` is what the app is given as ASGI ``receive`` and ``send``: ``receive`` hands
the body over whole once it is in (or a disconnect), then waits for the connection to go or the
answer to end; ``send`` builds the head from status lines made once, frames the body
(``content-length`` as the app gave it, else chunked, else for HTTP/1.0 ended by the close),
writes a whole answer as one ``write`` and gathers a stream's chunks within a loop turn, and
decides whether the connection is kept alive. :func:`refusal` makes the whole answers the
server sends on its own (400, 408, 431, 500, 503) in the gateway's error shape.

A cycle sees its connection only through :class:`Connection`, what it needs of one; the
connection (:class:`ankka.gateway.server._Connection`) is the server's, and this module never
imports the server, so the two are not an import circle (issue 23, item 3; an import-linter
contract keeps it so).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from email.utils import formatdate
from http import HTTPStatus
from typing import Any, Protocol

from ankka.gateway.wire import WATCH_DISCONNECT, Receive, Scope, Send, error_body

__all__ = ["App", "Connection", "Cycle", "Dates", "Listener", "refusal"]

log = logging.getLogger("ankka.gateway")

App = Callable[[Scope, Receive, Send], Awaitable[None]]


def _status_line(status: int) -> bytes:
    try:
        phrase = HTTPStatus(status).phrase.encode()
    except ValueError:
        phrase = b""
    return b"HTTP/1.1 %d %s\r\n" % (status, phrase)


_STATUS_LINES = {status.value: _status_line(status.value) for status in HTTPStatus}


def refusal(status: int, message: str, code: str, extra: bytes = b"") -> bytes:
    """A whole answer, in the gateway's error shape, after which the connection closes."""
    body = error_body(status, message, code=code)
    return (
        _STATUS_LINES[status]
        + b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n"
        % len(body)
        + extra
        + b"\r\n"
        + body
    )


class Dates:
    """The ``date`` header line, made once per second."""

    def __init__(self) -> None:
        self._second = 0
        self._line = b""

    def line(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._line = b"date: " + formatdate(now, usegmt=True).encode() + b"\r\n"
        return self._line


class Listener(Protocol):
    """What a cycle reads of the server its connection belongs to."""

    dates: Dates
    stopping: bool


class Connection(Protocol):
    """What a cycle needs of its connection: where to write, whether it is gone, and whom to
    tell when its answer is out and when its app has returned."""

    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    lost: bool
    out: list[bytes]
    write_paused: bool

    @property
    def server(self) -> Listener: ...

    def write(self, data: bytes) -> None: ...

    def flush(self) -> None: ...

    def schedule_flush(self) -> None: ...

    async def drain(self) -> None: ...

    def answered(self, cycle: Cycle) -> None: ...

    def finished(self, cycle: Cycle) -> None: ...


class Cycle:
    """One request and its answer: the ASGI ``receive`` and ``send`` the app is given."""

    __slots__ = (
        "body_done",
        "chunked",
        "complete",
        "conn",
        "expect",
        "head",
        "head_only",
        "http10",
        "keep_alive",
        "message_done",
        "on_gone",
        "over",
        "parts",
        "returned",
        "scope",
        "size",
        "started",
        "task",
        "waiter",
    )

    def __init__(self, conn: Connection, scope: Scope, *, keep_alive: bool, expect: bool) -> None:
        self.conn = conn
        self.scope = scope
        self.keep_alive = keep_alive
        self.expect = expect
        self.head_only = scope["method"] == "HEAD"
        self.http10 = scope["http_version"] == "1.0"
        self.parts: list[bytes] = []
        self.size = 0
        self.over = False  # more than max_body arrived: the rest is discarded
        self.body_done = False
        self.message_done = False
        self.returned = False
        self.started = False
        self.complete = False
        self.chunked = False
        self.head = b""
        self.waiter: asyncio.Future[None] | None = None
        self.task: asyncio.Task[None] | None = None  # the one running the app
        self.on_gone: Callable[[], bool] | None = None

    def watch(self, on_gone: Callable[[], bool] | None) -> None:
        """Call ``on_gone`` when the caller goes away (closes or half-closes) before the answer
        is out, and cancel the app's task if it answers True; ``None`` stops watching.

        What the app would otherwise learn from a second task waiting on :meth:`receive` for
        the disconnect, told by the connection itself: no task, no wake-up per request."""
        self.on_gone = on_gone
        if on_gone is not None and self.conn.lost:
            self.gone()

    def gone(self) -> None:
        """The connection is lost: tell the watcher (once), wake whoever waits."""
        self.wake()
        on_gone, self.on_gone = self.on_gone, None
        if on_gone is not None and not self.complete and on_gone() and self.task is not None:
            self.task.cancel()

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def _wait(self) -> None:
        self.waiter = self.conn.loop.create_future()
        await self.waiter

    async def receive(self) -> dict[str, Any]:
        conn = self.conn
        if not self.returned:
            if not self.body_done and not conn.lost:
                await self._wait()
            if not self.body_done:
                return {"type": "http.disconnect"}
            self.returned = True
            parts = self.parts
            body = parts[0] if len(parts) == 1 else b"".join(parts)
            return {"type": "http.request", "body": body, "more_body": False}
        while not (conn.lost or self.complete):
            await self._wait()
        return {"type": "http.disconnect"}

    def _start(self, status: int, headers: Iterable[tuple[bytes, bytes]]) -> bytes:
        conn = self.conn
        lines = [_STATUS_LINES.get(status) or _status_line(status), conn.server.dates.line()]
        length = False
        for name, value in headers:
            if b"\n" in name or b"\r" in name or b"\n" in value or b"\r" in value:
                raise ValueError(f"a response header may not hold a line break: {name!r}")
            lowered = name.lower()
            if lowered == b"content-length":
                length = True
            elif lowered == b"connection":
                if value.lower() == b"close":
                    self.keep_alive = False
                continue  # decided below
            lines.append(name + b": " + value + b"\r\n")
        if not self.message_done or conn.server.stopping:
            self.keep_alive = False  # a body still arriving, or going down: close after
        if not length:
            if self.http10:
                self.keep_alive = False  # no chunked encoding in HTTP/1.0: the close ends it
            else:
                self.chunked = True
                lines.append(b"transfer-encoding: chunked\r\n")
        if not self.keep_alive:
            lines.append(b"connection: close\r\n")
        elif self.http10:
            lines.append(b"connection: keep-alive\r\n")
        lines.append(b"\r\n")
        return b"".join(lines)

    async def send(self, message: Any) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if self.started:
                raise RuntimeError("the answer was already started")
            self.started = True
            self.head = self._start(message["status"], message.get("headers", ()))
            return
        if kind != "http.response.body" or not self.started or self.complete:
            raise RuntimeError(f"unexpected ASGI message {kind!r} for this answer")
        conn = self.conn
        if conn.lost:
            return  # nobody left to answer; the app hears the disconnect from receive()
        out = conn.out
        if self.head:
            out.append(self.head)
            self.head = b""
        body = message.get("body", b"")
        if body and not self.head_only:
            if self.chunked:
                out.append(b"%x\r\n" % len(body))
                out.append(body)
                out.append(b"\r\n")
            else:
                out.append(body)
        if message.get("more_body", False):
            if conn.write_paused:
                conn.flush()
                await conn.drain()
            else:
                conn.schedule_flush()
            return
        if self.chunked and not self.head_only:
            out.append(b"0\r\n\r\n")
        self.complete = True
        conn.flush()
        conn.answered(self)

    async def run(self, app: App) -> None:
        try:
            await app(self.scope, self.receive, self.send)
        except Exception:
            log.exception("failed answering %s %s", self.scope["method"], self.scope["path"])
            self._fail()
        else:
            if not self.complete:
                self._fail()
        finally:
            # The scope's watch is this cycle's bound method, and the task runs this method: let
            # both go, so a finished cycle (its body included) is freed by reference counting,
            # not left in a reference cycle for the collector.
            self.scope.pop(WATCH_DISCONNECT, None)
            self.on_gone = None
            self.task = None
            self.conn.finished(self)

    def _fail(self) -> None:
        """The app raised or ended without a whole answer: 500 if nothing was sent, else close."""
        conn = self.conn
        if self.complete or conn.lost:
            return
        if not self.started:
            conn.write(refusal(500, "the gateway failed answering; try again", "internal_error"))
        self.complete = True
        conn.transport.close()
