"""The Chat Completions provider: any OpenAI-compatible server, over the official ``openai`` SDK.

The SDK is the transport (connection pooling, retries, SSE framing); ankka builds the request
bytes and reads the answers itself (:mod:`.chat_wire`). SDK exceptions are translated here, in
one place, into errors naming the provider the service configured, never the SDK's vendor.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai

from ankka._kernel.errors import ModelError
from ankka.runtime.providers.base import ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.chat_wire import StreamAccumulator, encode_request, read_response
from ankka.runtime.providers.failures import (
    deadline,
    for_status,
    summarize_body,
    timed_out,
    unreachable,
)

__all__ = ["NO_KEY", "ChatCompletionsProvider", "translate_error"]

NO_KEY = "none"  # the bearer sent to servers that need no key
_JSON = {"Content-Type": "application/json"}


class ChatCompletionsProvider:
    def __init__(
        self,
        *,
        name: str,
        model: str,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        self._name = name
        self._model = model
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._client = openai.AsyncOpenAI(
            api_key=api_key or NO_KEY,
            base_url=self.base_url,
            timeout=httpx2.Timeout(timeout, connect=min(timeout, 10.0)),
            max_retries=max_retries,
            http_client=http_client,
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> str:
        return self._model

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body = encode_request(request, model=self._model, stream=False)
        try:
            async with deadline(self._name, self.timeout):
                response = await self._client.post(
                    "/chat/completions",
                    cast_to=httpx2.Response,
                    content=body,
                    options={"headers": _JSON},
                )
                data = json.loads(await response.aread())
        except openai.OpenAIError as exc:
            raise translate_error(self._name, exc, self.timeout) from exc
        except ValueError as exc:
            raise ModelError(self._name, "the server did not answer JSON") from exc
        try:
            return read_response(data, model=self._model)
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(
                self._name, f"the answer is not a Chat Completions answer: {exc}"
            ) from exc

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        body = encode_request(request, model=self._model, stream=True)
        accumulator = StreamAccumulator(self._model)
        try:
            # The deadline covers the wait for the answer to start; after that the SDK's
            # read timeout bounds each gap between chunks.
            async with deadline(self._name, self.timeout):
                chunks = await self._client.post(
                    "/chat/completions",
                    cast_to=dict[str, Any],
                    content=body,
                    options={"headers": _JSON},
                    stream=True,
                    stream_cls=openai.AsyncStream[dict[str, Any]],
                )
            async with chunks:
                async for chunk in chunks:
                    text = accumulator.add(chunk)
                    if text:
                        yield TextDelta(text)
        except openai.OpenAIError as exc:
            raise translate_error(self._name, exc, self.timeout) from exc
        yield accumulator.result()

    async def aclose(self) -> None:
        await self._client.close()


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
