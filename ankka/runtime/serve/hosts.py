"""Which ``Host`` the runtime answers, and no page of it in another site's frame (issue 31, item 4).

A web page the user visits can send requests to loopback, and a DNS-rebinding page can make its
own name resolve to 127.0.0.1, so that the browser counts the runtime as the page's own origin
(an ``Origin`` check passes). What such a request cannot hide is the name it was sent to: the
``Host`` header carries the attacker's domain. So a request is answered only when its ``Host``
(without the port) is one the runtime serves:

- an IP address (``127.0.0.1``, ``[::1]``, a pod's address: a rebinding page always names a
  domain, never an address; the kubelet's probes name the pod's address);
- ``localhost`` or a name under ``.localhost`` (RFC 6761: never resolved outside the machine);
- a name of one label (``runtime``, a cluster's search-domain short names) or a Kubernetes
  Service name (``….svc``, ``….svc.cluster.local``): names no public DNS answers;
- a name given with ``ankka serve --allowed-host NAME`` (repeatable; env
  ``ANKKA_ALLOWED_HOSTS``, comma-separated) or the host of ``--public-url``.

Any other is answered 421 ``misdirected_request``, naming the host and how to allow it. Every
answer also refuses to be framed by another site (``X-Frame-Options: DENY`` and a
``Content-Security-Policy`` with ``frame-ancestors 'none'`` where the route set none).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["ALLOWED_HOSTS_VARIABLE", "ServedHosts", "allowed_hosts", "host_problem"]

ALLOWED_HOSTS_VARIABLE = "ANKKA_ALLOWED_HOSTS"
MAX_HOST = 255  # the most a DNS name can be; a longer Host is refused without parsing

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_CLUSTER_SUFFIXES = (".svc", ".svc.cluster.local")
_FRAME_POLICY = b"frame-ancestors 'none'"


def _hostname(host: str) -> str | None:
    """The name or address of a ``Host`` header value, without its port; None when it is not
    a host at all."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end < 0 or (host[end + 1 :] and not host[end + 1 :].startswith(":")):
            return None
        return host[1:end]
    name, _, port = host.partition(":")
    if port and not port.isdigit():
        return None
    return name.removesuffix(".")


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def allowed_hosts(names: Iterable[str], public_url: str | None = None) -> frozenset[str]:
    """The names ``--allowed-host`` and ``--public-url`` add, lower case, without ports."""
    found = {n.strip().lower().removesuffix(".") for n in names if n.strip()}
    if public_url:
        host = urlsplit(public_url).hostname
        if host:
            found.add(host.lower())
    return frozenset(found)


def host_problem(host: str | None, allowed: frozenset[str]) -> str | None:
    """Why a request sent to ``host`` is not answered, or None when it is."""
    if host is None:
        return None  # HTTP/1.0 without Host: no browser sends that
    if len(host) > MAX_HOST:
        return f"the Host header is longer than {MAX_HOST} characters"
    name = _hostname(host)
    if not name:
        return f"the Host header {host[:80]!r} does not name a host"
    if (
        _is_address(name)
        or name == "localhost"
        or name.endswith(".localhost")
        or "." not in name
        or name.endswith(_CLUSTER_SUFFIXES)
        or name in allowed
    ):
        return None
    return (
        f"this runtime does not serve the host {name!r} (a page of another site may have sent "
        "this request); call it by its address, localhost or its Service name, or allow the "
        "name with ankka serve --allowed-host"
    )


class ServedHosts:
    """The ASGI app ``app``, answered only for the hosts above and never framed."""

    def __init__(self, app: ASGIApp, *, allowed: frozenset[str] = frozenset()) -> None:
        self._app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        host = next(
            (v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), None
        )
        problem = host_problem(host, self.allowed)
        if problem is not None:
            await _misdirected(send, problem)
            return

        async def framed(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = _unframed(message.get("headers") or [])
            await send(message)

        await self._app(scope, receive, framed)


def _unframed(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` with framing refused: the route's own policy gains ``frame-ancestors``."""
    out: list[tuple[bytes, bytes]] = []
    policy = False
    for name, value in headers:
        if name.lower() == b"content-security-policy":
            policy = True
            if b"frame-ancestors" not in value:
                value = value + b"; " + _FRAME_POLICY
        if name.lower() != b"x-frame-options":
            out.append((name, value))
    if not policy:
        out.append((b"content-security-policy", _FRAME_POLICY))
    out.append((b"x-frame-options", b"DENY"))
    return out


async def _misdirected(send: Send, problem: str) -> None:
    body = json.dumps({"error": {"type": "misdirected_request", "message": problem}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(body)),
        (b"x-frame-options", b"DENY"),
    ]
    await send({"type": "http.response.start", "status": 421, "headers": headers})
    await send({"type": "http.response.body", "body": body})
