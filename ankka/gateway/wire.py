"""Small raw-ASGI helpers: OpenAI-shaped errors, JSON answers, bounded body reads, the caller.

The gateway is a raw ASGI app (no framework between uvicorn and the proxy) because it sits on
every model call; these helpers keep that app readable. Every error a caller can meet is in
OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``, so the official clients
raise their usual exception with ``code`` set, and the message says what to do.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any

from ankka._kernel.errors import RequestError
from ankka.gateway.callers import ANONYMOUS, caller_name

__all__ = [
    "Receive",
    "Scope",
    "Send",
    "WATCH_DISCONNECT",
    "TooLarge",
    "WatchDisconnect",
    "caller_of",
    "error_body",
    "read_body",
    "send_bytes",
    "send_error",
    "send_json",
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

WATCH_DISCONNECT = "ankka.watch_disconnect"
"""The scope key under which the gateway's own server (:mod:`ankka.gateway.server`) hands the
app a :data:`WatchDisconnect` for the request: ``watch(on_gone)`` calls ``on_gone()`` when the
caller goes away before the answer is out, and cancels the request's task if it answers True;
``watch(None)`` stops it. Absent under uvicorn, where a task waits on ``receive`` instead."""
WatchDisconnect = Callable[[Callable[[], bool] | None], None]


_TYPES = {
    400: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


class TooLarge(RequestError):
    """The request body passed the gateway's limit; the caller must send less."""

    kind = "request_too_large"
    status = 413

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than {limit} bytes")
        self.limit = limit


def error_body(status: int, message: str, *, code: str, param: str | None = None) -> bytes:
    """An error in OpenAI's shape (:class:`~ankka.gateway.answers.OpenAIError`, which
    tests/unit/_kernel/test_openapi_frame.py checks these bytes against)."""
    kind = _TYPES.get(status, "server_error")
    error = {"message": message, "type": kind, "param": param, "code": code}
    return json.dumps({"error": error}).encode()


async def send_bytes(
    send: Send,
    status: int,
    body: bytes,
    *,
    content_type: bytes = b"application/json",
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, status: int, value: Any) -> None:
    await send_bytes(send, status, json.dumps(value).encode())


async def send_error(
    send: Send,
    status: int,
    message: str,
    *,
    code: str,
    param: str | None = None,
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    await send_bytes(
        send, status, error_body(status, message, code=code, param=param), headers=headers
    )


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole request body; :class:`TooLarge` as soon as it is known to pass ``limit``."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                if int(value) > limit:
                    raise TooLarge(limit)
            except ValueError:
                pass
            break
    parts: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionResetError("the client went away while sending its request")
        chunk: bytes = message.get("body", b"")
        total += len(chunk)
        if total > limit:
            raise TooLarge(limit)
        parts.append(chunk)
        if not message.get("more_body", False):
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


def caller_of(scope: Mapping[str, Any]) -> str:
    """The caller's identity from its client certificate: ``namespace/agent`` for a service
    (see :func:`ankka.gateway.callers.caller_name`).

    The TLS layer (:mod:`ankka._kernel.serve`) puts the certificate's URI SANs in
    ``scope["extensions"]["tls"]["peer_uri_sans"]``. Without TLS there is no identity.
    """
    extensions = scope.get("extensions")
    tls = extensions.get("tls") if extensions else None
    if not tls:
        return ANONYMOUS
    return caller_name(tls.get("peer_uri_sans", ()))
