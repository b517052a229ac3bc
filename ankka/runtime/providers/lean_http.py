"""The HTTP transport under the vendors' SDKs: ankka's lean client behind httpx2's seam.

The official ``openai`` and ``anthropic`` SDKs stay the API of a model call (retries, headers,
SSE framing, their errors); what they accept is an ``httpx2.AsyncClient``, and an
``httpx2.AsyncClient`` accepts a transport (``handle_async_request``). httpx2's own transport
(httpcore, h11, anyio) cost about 2.8 ms of a turn's 5.8 ms own time (py-spy, issue 11); this
one writes the request the SDK built onto a pooled connection of :mod:`ankka._kernel.upstream`
(the gateway's upstream client, asyncio protocols and httptools) and hands the body back as it
arrives. The SDK sees httpx2's exceptions, so it retries and maps errors as before:
:class:`~ankka._kernel.upstream.ConnectTimedOut` is ``httpx2.ConnectTimeout``, any other
connect failure ``httpx2.ConnectError``, no byte within the read timeout
``httpx2.ReadTimeout``, anything else ``httpx2.RemoteProtocolError``.

The request line and headers are the SDK's, written as httpx2 built them (``Host``,
``Content-Length``, the bearer); none of them is ever put into an error.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from typing import Any

import httptools
import httpx2

from ankka._kernel.upstream import (
    ConnectFailed,
    ConnectTimedOut,
    Pool,
    Response,
    UpstreamError,
    UpstreamTimeout,
)

__all__ = ["LeanTransport", "lean_client"]

_DEFAULT_TIMEOUT = 60.0


def _httpx_error(exc: UpstreamError, request: httpx2.Request) -> httpx2.TransportError:
    message = str(exc)
    if isinstance(exc, ConnectTimedOut):
        return httpx2.ConnectTimeout(message, request=request)
    if isinstance(exc, ConnectFailed):
        return httpx2.ConnectError(message, request=request)
    if isinstance(exc, UpstreamTimeout):
        return httpx2.ReadTimeout(message, request=request)
    return httpx2.RemoteProtocolError(message, request=request)


class _Body(httpx2.AsyncByteStream):
    def __init__(self, response: Response, request: httpx2.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.chunks():
                yield chunk
        except UpstreamError as exc:
            self._response.close()
            raise _httpx_error(exc, self._request) from exc

    async def aclose(self) -> None:
        self._response.close()


class LeanTransport(httpx2.AsyncBaseTransport):
    """httpx2's transport seam over :class:`ankka._kernel.upstream.Pool` (HTTP/1.1 only)."""

    def __init__(self, *, tls: ssl.SSLContext | None = None) -> None:
        self._pool = Pool(parser=httptools.HttpResponseParser, tls=tls)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        tls = url.scheme == "https"
        origin = (url.host, url.port or (443 if tls else 80), tls)
        timeouts: dict[str, Any] = request.extensions.get("timeout") or {}
        connect = timeouts.get("connect") or _DEFAULT_TIMEOUT
        read = timeouts.get("read") or _DEFAULT_TIMEOUT
        body = await request.aread()
        head = [request.method.encode("ascii"), b" ", url.raw_path, b" HTTP/1.1\r\n"]
        for name, value in request.headers.raw:
            head += (name, b": ", value, b"\r\n")
        head.append(b"\r\n")
        head.append(body)
        try:
            response = await self._pool.send(
                origin, b"".join(head), connect_timeout=connect, read_timeout=read
            )
        except UpstreamError as exc:
            raise _httpx_error(exc, request) from exc
        return httpx2.Response(
            response.status,
            headers=response.headers,
            stream=_Body(response, request),
            extensions={"http_version": b"HTTP/1.1"},
            request=request,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


def lean_client(
    timeout: httpx2.Timeout, *, tls: ssl.SSLContext | None = None
) -> httpx2.AsyncClient:
    """The ``http_client`` handed to a vendor's SDK: its settings as the SDK's own default
    client has them (redirects followed), over :class:`LeanTransport`."""
    return httpx2.AsyncClient(
        transport=LeanTransport(tls=tls), timeout=timeout, follow_redirects=True
    )
