"""What an MCP server may send in one answer: at most :data:`MAX_ANSWER_BYTES`, read as it
arrives and cut off there, never read whole first.

A server's answer is one JSON body or one event of an event stream. Event streams are bounded
by the SDK itself (its transport's ``max_sse_event_size``, which :mod:`.connection` sets to the
same figure); a JSON body the SDK reads whole, so :class:`BoundedTransport` stands under the
HTTP client and counts a JSON body's bytes as they arrive, stopping at the limit with
a ``StreamError`` (the SDK then answers the request with a parse error naming it, and
the call is a tool error). The MCP endpoint is asked for uncompressed JSON (so the bytes
counted are the bytes decoded), and a JSON answer compressed anyway is refused the same way
(an event stream is counted by the SDK after decoding). Other URLs the client reaches (an
OAuth authorization server) pass through unchanged.

:func:`too_large` tells the SDK's error for either cut from any other failure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2

__all__ = ["MAX_ANSWER_BYTES", "BoundedTransport", "cut_off", "too_large"]

MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""Bytes of one answer (a JSON body, or one event of a stream). A result the model is shown
is cut at 1,000,000 characters (:data:`~.results.MAX_RESULT`); this bound holds such a result
as JSON even with every character escaped (six bytes) and the text repeated as structured
content (as the SDK's servers answer), so nothing the model could be shown is lost."""

_MARK = "was cut off unread past"
_SSE_MARK = "byte limit"  # httpx2's SSEError: "Server-sent event exceeded the N byte limit."


class _AnswerTooLarge(httpx2.StreamError):
    """An answer passed :data:`MAX_ANSWER_BYTES`; reading stopped there. Raised inside the
    SDK's transport, which answers the request with a parse error (it catches httpx2's
    ``StreamError``, so this is no ``AnkkaError``); it never reaches ankka's callers."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer {_MARK} {limit} bytes")


class _Compressed(httpx2.StreamError):
    def __init__(self, encoding: str) -> None:
        super().__init__(f"the server compressed its answer ({encoding[:40]}) though asked not to")


def cut_off(exc: BaseException | None) -> bool:
    """Whether ``exc`` is this module's cut of an answer at the limit."""
    return isinstance(exc, _AnswerTooLarge)


def too_large(message: str) -> bool:
    """Whether an SDK error message reports an answer cut at the limit."""
    return _MARK in message or _SSE_MARK in message


class _Counted(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, encoding: str) -> None:
        self._inner = inner
        self._limit = limit
        self._encoding = encoding

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._encoding not in ("", "identity"):
            raise _Compressed(self._encoding)
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise _AnswerTooLarge(self._limit)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """The HTTP transport, with the MCP endpoint's JSON answers counted as they arrive."""

    def __init__(self, endpoint: str, *, limit: int = MAX_ANSWER_BYTES) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._endpoint = endpoint
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if str(request.url) != self._endpoint:
            return await self._inner.handle_async_request(request)
        request.headers["accept-encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        kind = response.headers.get("content-type", "").lower()
        if not kind.startswith("application/json"):
            return response
        encoding = response.headers.get("content-encoding", "").strip().lower()
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_Counted(stream, self._limit, encoding),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()
