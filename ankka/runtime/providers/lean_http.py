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

Above the transport, :class:`LeanClient` is the ``httpx2.AsyncClient`` the SDKs are given. It
sends exactly what httpx2's client would (the same URL, headers in the same order, the same
timeouts, redirects followed, cookies kept), but does once per client what httpx2 does per
call: the URL is parsed once per address and the merged headers once per set the SDK sends (the
SDK's headers change only with a retry), so a call builds one ``Request`` from those and its
body and goes straight to the transport (py-spy, issue 11: httpx2's ``build_request`` and
``send`` were about 40 % of the SDK's own time per call). Anything it does not take the short
way (query parameters, files, form data, cookies, auth, credentials in the URL, event hooks,
a proxy from the environment) goes through httpx2's own code unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httptools
import httpx2
from httpx2._client import USE_CLIENT_DEFAULT, BoundAsyncStream, UseClientDefault

from ankka._kernel import tracing
from ankka._kernel.upstream import (
    ConnectFailed,
    ConnectTimedOut,
    Pool,
    Response,
    UpstreamError,
    UpstreamTimeout,
)

__all__ = ["LeanClient", "LeanTransport", "lean_client"]

_DEFAULT_TIMEOUT = 60.0
_LOG = logging.getLogger("httpx2")  # the line httpx2's client logs for every request, kept
_TEMPLATES = 64  # header sets kept per client (an SDK sends one per retry count)


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
        head.append(tracing.header_lines())  # the W3C trace context; nothing when tracing is off
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


class LeanClient(httpx2.AsyncClient):
    """httpx2's client with its per-call work done once per client (module docstring)."""

    def __init__(self, *, transport: httpx2.AsyncBaseTransport, timeout: httpx2.Timeout) -> None:
        super().__init__(transport=transport, timeout=timeout, follow_redirects=True)
        self._lean_transport = transport
        # (method, url, the SDK's headers) -> the URL parsed and the headers merged, Host first
        self._templates: dict[tuple[str, str, tuple[Any, ...]], tuple[httpx2.URL, httpx2.Headers]]
        self._templates = {}

    def build_request(
        self,
        method: str,
        url: httpx2.URL | str,
        *,
        content: Any = None,
        data: Any = None,
        files: Any = None,
        json: Any = None,
        params: Any = None,
        headers: Any = None,
        cookies: Any = None,
        timeout: Any = USE_CLIENT_DEFAULT,
        extensions: Any = None,
    ) -> httpx2.Request:
        if (
            not isinstance(url, str)
            or not isinstance(content, bytes)
            or not isinstance(headers, Sequence)
            or data is not None
            or files is not None
            or json is not None
            or params
            or cookies
            or extensions
            or self.cookies
        ):
            return super().build_request(
                method,
                url,
                content=content,
                data=data,
                files=files,
                json=json,
                params=params,
                headers=headers,
                cookies=cookies,
                timeout=timeout,
                extensions=extensions,
            )
        key = (method, url, tuple(headers))
        template = self._templates.get(key)
        if template is None:
            template = self._template(method, url, headers)
        limits = self.timeout if isinstance(timeout, UseClientDefault) else httpx2.Timeout(timeout)
        request = httpx2.Request(
            method,
            template[0],
            headers=template[1],
            stream=httpx2.ByteStream(content),
            extensions={"timeout": limits.as_dict()},
        )
        request.headers["Content-Length"] = str(len(content))
        request.read()
        return request

    def _template(
        self, method: str, url: str, headers: Sequence[Any]
    ) -> tuple[httpx2.URL, httpx2.Headers]:
        """httpx2's own request for these headers, its Content-Length left for each body."""
        probe = super().build_request(method, url, headers=headers, content=b"")
        raw = [(k, v) for k, v in probe.headers.raw if k.lower() != b"content-length"]
        template = (probe.url, httpx2.Headers(raw, encoding=probe.headers.encoding))
        if len(self._templates) >= _TEMPLATES:
            self._templates.clear()
        self._templates[(method, url, tuple(headers))] = template
        return template

    async def send(
        self,
        request: httpx2.Request,
        *,
        stream: bool = False,
        auth: Any = USE_CLIENT_DEFAULT,
        follow_redirects: bool | UseClientDefault = USE_CLIENT_DEFAULT,
    ) -> httpx2.Response:
        if (
            self.is_closed
            or not isinstance(auth, UseClientDefault)
            or self.auth is not None
            or request.url.userinfo  # httpx2 turns user:pass@ into Basic auth
            or self.event_hooks["request"]
            or self.event_hooks["response"]
            or self._transport_for_url(request.url) is not self._lean_transport
        ):
            return await super().send(
                request, stream=stream, auth=auth, follow_redirects=follow_redirects
            )
        started = time.perf_counter()
        response = await self._lean_transport.handle_async_request(request)
        body = response.stream
        assert isinstance(body, httpx2.AsyncByteStream)
        response.request = request
        response.stream = BoundAsyncStream(body, start=started)
        if "set-cookie" in response.headers:
            self.cookies.extract_cookies(response)
        if _LOG.isEnabledFor(logging.INFO):
            _LOG.info(
                'HTTP Request: %s %s "%s %d %s"',
                request.method,
                request.url,
                response.http_version,
                response.status_code,
                response.reason_phrase,
            )
        if response.has_redirect_location:  # rare: as httpx2's client does, then its own code
            if not (
                self.follow_redirects
                if isinstance(follow_redirects, UseClientDefault)
                else follow_redirects
            ):
                with contextlib.suppress(httpx2.RemoteProtocolError):  # a bad Location
                    response.next_request = self._build_redirect_request(request, response)
                return await self._finish(response, stream)
            try:
                following = self._build_redirect_request(request, response)
                await response.aread()  # as httpx2 does: the connection goes back to the pool
            finally:
                await response.aclose()
            # httpx2 follows from here (this first hop is not in the answer's history)
            return await super().send(following, stream=stream, follow_redirects=True)
        return await self._finish(response, stream)

    @staticmethod
    async def _finish(response: httpx2.Response, stream: bool) -> httpx2.Response:
        if not stream:
            try:
                await response.aread()
            except BaseException:
                await response.aclose()
                raise
        return response


def lean_client(
    timeout: httpx2.Timeout,
    *,
    tls: ssl.SSLContext | None = None,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> httpx2.AsyncClient:
    """The ``http_client`` handed to a vendor's SDK: its settings as the SDK's own default
    client has them (redirects followed), over :class:`LeanTransport` (or ``transport``)."""
    return LeanClient(transport=transport or LeanTransport(tls=tls), timeout=timeout)
