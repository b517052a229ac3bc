"""Draining a server that was told to stop: what is in flight is answered, never dropped.

On SIGTERM uvicorn stops accepting connections and waits up to its grace period
(``GRACE_SECONDS``) for the requests in flight; then it cancels them, and a request cancelled
before its answer started is sent a plain-text ``500 Internal Server Error``. :class:`Drain`, an
ASGI wrapper around the app, is told when the server begins to stop (:meth:`Drain.stop`, from
the signal) and, shortly before uvicorn's own deadline, cuts each request still running
itself: the request's task is cancelled (the runtime's turn then writes nothing but the
accounting of what it spent, as for a caller who left), and its caller is answered in the API's
error shape: ``503 {"error": {"type": "shutting_down", ...}}`` with ``Retry-After``, or, for a
server-sent event stream already under way, a last ``event: error`` with that body. Each cut is
logged with its method, path and how long it had run. A request that arrives on a kept-alive
connection while draining is answered the same way at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CUT_BEFORE", "GRACE_SECONDS", "Drain", "cut_by_shutdown"]

log = logging.getLogger("ankka.serve")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

GRACE_SECONDS = 10  # uvicorn's timeout_graceful_shutdown (_kernel/serve.py)
CUT_BEFORE = 1.0  # what is still running this long before uvicorn's deadline is cut here
RETRY_AFTER = 1
SCOPE_KEY = "ankka.drain"  # the request's flight, in its scope: cut_by_shutdown reads it


@dataclass
class _InFlight:
    method: str
    path: str
    began: float
    started: bool = False  # the answer's head went out
    streaming: bool = False  # ... as server-sent events
    cut: bool = False
    done: set[str] = field(default_factory=set)


def _error(message: str) -> bytes:
    return json.dumps({"error": {"type": "shutting_down", "message": message}}).encode()


class Drain:
    def __init__(self, app: App, *, grace: float = GRACE_SECONDS, name: str = "ankka") -> None:
        self._app = app
        self._grace = grace
        self._name = name
        self._running: dict[asyncio.Task[Any], _InFlight] = {}
        self._stopping = False
        self._timer: asyncio.TimerHandle | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if self._stopping:
            await self._refuse(send, "the server is shutting down; send the request again")
            return
        task = asyncio.current_task()
        assert task is not None
        flight = _InFlight(scope.get("method", "?"), scope.get("path", "?"), time.monotonic())
        self._running[task] = flight
        scope[SCOPE_KEY] = flight

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                flight.started = True
                headers = dict(message.get("headers") or [])
                flight.streaming = headers.get(b"content-type", b"").startswith(
                    b"text/event-stream"
                )
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                flight.done.add("body")
            await send(message)

        try:
            await self._app(scope, receive, watched)
        except asyncio.CancelledError:
            if not flight.cut:
                raise  # not the drain's: the caller left, or the server gave up itself
            task.uncancel()
            await self._answer_cut(flight, send)
        finally:
            self._running.pop(task, None)

    def stop(self) -> None:
        """The server began to stop (call on the event loop): refuse what arrives from now
        on, and cut what still runs ``CUT_BEFORE`` seconds before the grace period ends."""
        if self._stopping:
            return
        self._stopping = True
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(max(0.0, self._grace - CUT_BEFORE), self._cut)

    def _cut(self) -> None:
        for task, flight in list(self._running.items()):
            if not task.done() and "body" not in flight.done:
                flight.cut = True
                task.cancel(msg="cut by the server's shutdown")

    async def _answer_cut(self, flight: _InFlight, send: Send) -> None:
        ran = time.monotonic() - flight.began
        message = (
            f"the server is shutting down and cut this request after {ran:.1f} s; what it had "
            "not committed was not written (a turn: not at all); send it again"
        )
        log.warning(
            "%s: shutting down: cut %s %s after %.1f s (%s)",
            self._name,
            flight.method,
            flight.path,
            ran,
            "its stream ended with an error event" if flight.streaming else "answered 503",
        )
        try:
            if not flight.started:
                await self._refuse(send, message)
            elif flight.streaming:
                body = b"event: error\ndata: " + _error(message) + b"\n\n"
                await send({"type": "http.response.body", "body": body, "more_body": False})
            else:  # a plain answer half sent: end it; the caller sees it cut short
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the caller is gone too

    @staticmethod
    async def _refuse(send: Send, message: str) -> None:
        body = _error(message)
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", str(RETRY_AFTER).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def cut_by_shutdown(scope: Scope) -> bool:
    """Whether the drain cut this request (``scope``, or a copy of it), the server stopping:
    an app whose request is cancelled tells this apart from its caller leaving."""
    flight = scope.get(SCOPE_KEY)
    return isinstance(flight, _InFlight) and flight.cut
