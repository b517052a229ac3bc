"""The official ``openai`` SDK used as a transport only: bytes out, JSON in, errors translated.

Both OpenAI-wire providers (Chat Completions for any compatible server, Responses for OpenAI's
own API) build their request bytes and read their answers themselves; what they share is this:
one SDK client (retries, SSE framing, the bearer `none` for keyless servers) over ankka's lean
HTTP transport (:mod:`.lean_http`, pooled keep-alive connections), one deadline over a whole
call, and one translation of the SDK's exceptions into errors naming the provider the service
configured, never the SDK's vendor (:mod:`.openai_sdk`).

The SDK is imported, and its client built, at the transport's first call, on the event loop
thread that makes it (or where :attr:`OpenAITransport.client` is first read): importing
``openai`` takes about half a second, which ``ankka serve`` no longer spends before it listens
(docs/benchmarks.md). A whole answer is decoded through :func:`ankka._kernel.jsonload.loads`
(orjson, and ``json`` wherever the two would read it differently, such as an integer past 64
bits).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx2

from ankka._kernel.errors import ModelError
from ankka._kernel.jsonload import loads
from ankka.runtime.providers.failures import deadline
from ankka.runtime.providers.lean_http import lean_client

if TYPE_CHECKING:
    from ankka.runtime.providers.openai_sdk import Client

__all__ = ["NO_KEY", "OpenAITransport"]

NO_KEY = "none"  # the bearer sent to servers that need no key
_JSON = {"Content-Type": "application/json"}


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
        self._settings = (api_key or NO_KEY, base_url.rstrip("/"), max_retries, http_client)
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        """The SDK's client, built (and ``openai`` imported) at the first use."""
        if self._client is None:
            from ankka.runtime.providers.openai_sdk import Client

            api_key, base_url, max_retries, http_client = self._settings
            limits = httpx2.Timeout(self.timeout, connect=min(self.timeout, 10.0))
            self._client = Client(
                api_key=api_key,
                base_url=base_url,
                timeout=limits,
                max_retries=max_retries,
                http_client=http_client if http_client is not None else lean_client(limits),
            )
        return self._client

    async def post_json(self, path: str, body: bytes) -> dict[str, Any]:
        """POST ``body`` and return the JSON answer, within the model timeout."""
        client = self.client
        from ankka.runtime.providers import openai_sdk as sdk  # imported by .client already

        try:
            async with deadline(self.provider, self.timeout):
                response = await client.post(
                    path,
                    cast_to=httpx2.Response,
                    content=body,
                    options={"headers": _JSON},
                )
                data = loads(await response.aread())
        except sdk.OpenAIError as exc:
            raise sdk.translate_error(self.provider, exc, self.timeout) from exc
        except ValueError as exc:
            raise ModelError(self.provider, "the server did not answer JSON") from exc
        if not isinstance(data, dict):
            raise ModelError(self.provider, "the server did not answer a JSON object")
        return data

    async def post_events(self, path: str, body: bytes) -> AsyncIterator[dict[str, Any]]:
        """POST ``body`` and yield the server-sent events' JSON payloads as they arrive.

        The deadline covers the wait for the answer to start; after that the SDK's read
        timeout bounds each gap between events."""
        client = self.client
        from ankka.runtime.providers import openai_sdk as sdk  # imported by .client already

        try:
            async with deadline(self.provider, self.timeout):
                events = await client.post(
                    path,
                    cast_to=dict[str, Any],
                    content=body,
                    options={"headers": _JSON},
                    stream=True,
                    stream_cls=sdk.AsyncStream[dict[str, Any]],
                )
            async with events:
                async for event in events:
                    yield event
        except sdk.OpenAIError as exc:
            raise sdk.translate_error(self.provider, exc, self.timeout) from exc

    async def aclose(self) -> None:
        if self._client is not None:  # never used: nothing was opened
            await self._client.close()
