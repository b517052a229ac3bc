"""The official ``openai`` SDK used as a transport only: bytes out, JSON in, errors translated.

Both OpenAI-wire providers (Chat Completions for any compatible server, Responses for OpenAI's
own API) build their request bytes and read their answers themselves; what they share is this:
one SDK client (retries, SSE framing, the bearer `none` for keyless servers) over ankka's lean
HTTP transport (:mod:`.lean_http`, pooled keep-alive connections), one deadline over a whole
call, and one translation of the SDK's exceptions into errors naming the provider the service
configured, never the SDK's vendor.

The client keeps each URL it has joined to its base URL (:class:`_Client`: the SDK parses and
joins it again on every call, about a tenth of its own time per call), and a whole answer is
decoded through :func:`ankka._kernel.jsonload.loads` (orjson, and ``json`` wherever the two
would read it differently, such as an integer past 64 bits).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai

from ankka._kernel.errors import ModelError
from ankka._kernel.jsonload import loads
from ankka.runtime.providers.failures import (
    deadline,
    for_status,
    summarize_body,
    timed_out,
    unreachable,
)
from ankka.runtime.providers.lean_http import lean_client

__all__ = ["NO_KEY", "OpenAITransport", "translate_error"]

NO_KEY = "none"  # the bearer sent to servers that need no key
_JSON = {"Content-Type": "application/json"}
_JOINED = 32  # URLs kept per client: a provider posts to one or two paths


class _Client(openai.AsyncOpenAI):
    """The official client, keeping the URLs it joined to its base URL (a few paths)."""

    _joined: dict[str, httpx2.URL]
    _joined_to: httpx2.URL | None = None

    def _prepare_url(self, url: str) -> httpx2.URL:
        base = self.base_url
        if base is not self._joined_to or len(self._joined) >= _JOINED:
            self._joined, self._joined_to = {}, base  # new, the base URL was set, or full
        joined = self._joined.get(url)
        if joined is None:
            joined = self._joined[url] = super()._prepare_url(url)
        return joined


class OpenAITransport:
    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        api_key: str | None,
        timeout: float,
        max_retries: int = 0,  # ankka retries (providers/retry.py), never the SDK too
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        self.provider = provider
        self.timeout = timeout
        limits = httpx2.Timeout(timeout, connect=min(timeout, 10.0))
        self.client = _Client(
            api_key=api_key or NO_KEY,
            base_url=base_url.rstrip("/"),
            timeout=limits,
            max_retries=max_retries,
            http_client=http_client if http_client is not None else lean_client(limits),
        )

    async def post_json(self, path: str, body: bytes) -> dict[str, Any]:
        """POST ``body`` and return the JSON answer, within the model timeout."""
        try:
            async with deadline(self.provider, self.timeout):
                response = await self.client.post(
                    path,
                    cast_to=httpx2.Response,
                    content=body,
                    options={"headers": _JSON},
                )
                data = loads(await response.aread())
        except openai.OpenAIError as exc:
            raise translate_error(self.provider, exc, self.timeout) from exc
        except ValueError as exc:
            raise ModelError(self.provider, "the server did not answer JSON") from exc
        if not isinstance(data, dict):
            raise ModelError(self.provider, "the server did not answer a JSON object")
        return data

    async def post_events(self, path: str, body: bytes) -> AsyncIterator[dict[str, Any]]:
        """POST ``body`` and yield the server-sent events' JSON payloads as they arrive.

        The deadline covers the wait for the answer to start; after that the SDK's read
        timeout bounds each gap between events."""
        try:
            async with deadline(self.provider, self.timeout):
                events = await self.client.post(
                    path,
                    cast_to=dict[str, Any],
                    content=body,
                    options={"headers": _JSON},
                    stream=True,
                    stream_cls=openai.AsyncStream[dict[str, Any]],
                )
            async with events:
                async for event in events:
                    yield event
        except openai.OpenAIError as exc:
            raise translate_error(self.provider, exc, self.timeout) from exc

    async def aclose(self) -> None:
        await self.client.close()


def translate_error(provider: str, exc: openai.OpenAIError, timeout: float) -> ModelError:
    """Map an SDK exception to ankka's error for ``provider``, keeping the SDK's words out."""
    if isinstance(exc, openai.APITimeoutError):
        return timed_out(provider, timeout)
    if isinstance(exc, openai.APIConnectionError):
        return unreachable(provider, exc.__cause__)
    if isinstance(exc, openai.APIStatusError):
        return for_status(provider, exc.status_code, summarize_body(exc.response))
    if isinstance(exc, openai.APIError):
        body = exc.body if isinstance(exc.body, dict) else {}
        detail = str(body.get("message") or "no detail")[:300]
        return ModelError(provider, f"the server reported an error mid-stream: {detail}")
    return ModelError(provider, type(exc).__name__)
