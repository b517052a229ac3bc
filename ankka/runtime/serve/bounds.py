"""Bounded input for the runtime's HTTP API: the body's size and the session id's form.

A pure ASGI layer in front of the routes (:func:`ankka.runtime.serve.http.create_app` puts it
there):

- **the body** may be at most ``max_body`` bytes (1 MiB by default, ``ankka serve
  --max-body-bytes``): a declared ``Content-Length`` past it is answered 413 before a byte of
  the body is read, and a chunked body is cut off with 413 as soon as it passes the limit;
- **a session id** (the ``{session}`` of every session route) must be 1 to
  :data:`MAX_SESSION_ID` characters of valid UTF-8 with no ``/`` and no control character. The
  rule is checked on the raw path, before the server's own percent-decoding: that decoding
  turns invalid UTF-8 (``%FF``, ``%FE``) into U+FFFD, so two different ids would share one
  journal, and it decodes ``%2F`` before routing, so the id would be split;
- **one caller's share**: an identified caller may have at most ``caller_share`` requests in
  flight (streams included; ``--max-requests-per-caller``, half of ``--max-connections``
  by default); past it, 429 with ``Retry-After``, so one caller's streams cannot hold every
  connection. The open paths (the probes among them) and local callers are not counted;
- **a caller who leaves mid-body** is a normal event, not a failure: it is counted
  (``ankka_caller_disconnects_total``) and answered with nothing, no traceback logged.

Before all that, the caller is named (:mod:`ankka.runtime.serve.identity`) into
``scope["ankka.caller"]``, or refused; ``/healthz``, ``/readyz``, ``/metrics`` and
``/openapi.json`` are open to every caller, and so are the A2A agent cards. The request head
is bounded by the listener itself (:mod:`ankka._kernel.bounded`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote_to_bytes

from ankka._kernel.errors import AnkkaError, RequestError
from ankka._kernel.shares import CallerShares
from ankka.runtime.declare.policy import LOCAL
from ankka.runtime.serve.identity import Identify

__all__ = [
    "DEFAULT_MAX_BODY",
    "MAX_SESSION_ID",
    "BodyTooLarge",
    "BoundedInput",
    "CallerLeft",
    "session_id_problem",
]

DEFAULT_MAX_BODY = 1024 * 1024
# Answered to anyone: probes, scrapes and the API's description carry no session data.
_OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json"})
_CARD = "/.well-known/agent-card.json"  # an A2A agent card: how to call, so before any identity


def is_open(path: str) -> bool:
    """Whether ``path`` is answered to every caller: the probes, the scrape, the API's
    description and the A2A cards (the host root's and ``/a2a/{agent}``'s: docs/a2a.md)."""
    if path in _OPEN_PATHS or path == _CARD:
        return True
    head, _, agent = path.removesuffix(_CARD).rpartition("/")
    return path.endswith(_CARD) and head == "/a2a" and bool(agent)


MAX_SESSION_ID = 256

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyTooLarge(RequestError):
    kind = "request_too_large"
    status = 413


class InvalidSessionId(RequestError):
    kind = "invalid_session_id"
    status = 400


class PastShare(RequestError):
    """The caller has as many requests in flight as its share of the server allows."""

    kind = "too_many_requests"
    status = 429
    retry_after = 1


class CallerLeft(RequestError):
    """The caller disconnected before its request arrived whole: nobody is left to answer."""

    kind = "caller_left"
    status = 499


def _raw_session(raw_path: bytes) -> bytes | None:
    """The raw ``{session}`` segment of a session route, or None for other paths."""
    parts = raw_path.split(b"/")
    if parts[1:3] == [b"v1", b"sessions"] and len(parts) >= 4:
        return parts[3]
    if parts[1:3] == [b"v1", b"agents"] and len(parts) >= 6 and parts[4] == b"sessions":
        return parts[5]
    return None


def session_id_problem(raw: bytes) -> str | None:
    """What is wrong with a raw (still percent-encoded) session id, or None."""
    if b"%2f" in raw.lower():
        return "a session id cannot contain '/' (%2F)"
    try:
        session = unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return "a session id must be valid UTF-8 (a percent-encoded byte such as %FF is not)"
    if len(session) > MAX_SESSION_ID:
        return f"a session id is at most {MAX_SESSION_ID} characters, not {len(session)}"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in session):
        return "a session id cannot contain control characters"
    return None


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _refuse(send: Send, error: AnkkaError) -> None:
    body = json.dumps({"error": {"type": error.kind, "message": str(error)}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if error.retry_after is not None:
        headers.append((b"retry-after", b"%d" % max(1, round(error.retry_after))))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BoundedInput:
    """The ASGI app ``app`` behind the body and session-id bounds described above."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body: int,
        on_caller_left: Callable[[], None],
        identify: Identify | None = None,
        caller_share: int | None = None,
    ) -> None:
        self._app = app
        self.max_body = max_body
        self._on_caller_left = on_caller_left
        self._identify = identify
        self.shares = CallerShares(caller_share) if caller_share is not None else None

    def _too_large(self) -> BodyTooLarge:
        return BodyTooLarge(
            f"the request body is larger than the limit of {self.max_body} bytes; send a "
            "shorter message (the server's --max-body-bytes sets the limit)"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if self._identify is None or is_open(scope["path"]):
            scope["ankka.caller"] = LOCAL
        else:
            try:
                scope["ankka.caller"] = await self._identify.resolve(scope)
            except AnkkaError as exc:
                await _refuse(send, exc)
                return
        raw = _raw_session(scope.get("raw_path") or scope["path"].encode())
        problem = None if raw is None else session_id_problem(raw)
        if problem is not None:
            await _refuse(send, InvalidSessionId(problem))
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.max_body:
            await _refuse(send, self._too_large())
            return
        received = 0
        complete = False

        async def bounded_receive() -> Message:
            nonlocal received, complete
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    raise self._too_large()
                complete = not message.get("more_body", False)
            elif message["type"] == "http.disconnect" and not complete:
                self._on_caller_left()
                raise CallerLeft("the caller left before its request arrived whole")
            return message

        caller = scope["ankka.caller"]
        shares = self.shares if caller != LOCAL else None  # the machine's own user: no share
        if shares is None:
            await self._app(scope, bounded_receive, send)
            return
        if not shares.take(caller):
            await _refuse(send, self._past_share(shares.share))
            return
        try:
            await self._app(scope, bounded_receive, send)
        finally:
            shares.give_back(caller)

    @staticmethod
    def _past_share(share: int) -> PastShare:
        return PastShare(
            f"this caller has {share} requests in flight, its share of the server's "
            "connections; retry when one ends (--max-requests-per-caller sets the share)"
        )
