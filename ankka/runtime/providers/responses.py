"""The OpenAI Responses provider, for OpenAI's own API, over the ``openai`` SDK as transport.

OpenAI's reasoning models keep their reasoning between the calls of a tool round only through
Responses (Chat Completions drops it), so OpenAI's own API is spoken this way and every other
server through :mod:`.chat_completions`. ankka builds the request bytes and reads the answers
(:mod:`.responses_wire`); SDK exceptions are translated by the Chat Completions provider's
:func:`~.chat_completions.translate_error` (the same SDK, the same exceptions), naming the
provider the service configured.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai

from ankka._kernel.errors import ModelError
from ankka.runtime.providers.base import ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.chat_completions import NO_KEY, translate_error
from ankka.runtime.providers.failures import deadline
from ankka.runtime.providers.responses_wire import (
    StreamAccumulator,
    StreamFailed,
    encode_request,
    read_response,
)

__all__ = ["DEFAULT_URL", "ResponsesProvider"]

DEFAULT_URL = "https://api.openai.com/v1"
_JSON = {"Content-Type": "application/json"}


class ResponsesProvider:
    def __init__(
        self,
        *,
        name: str,
        model: str,
        api_key: str | None,
        base_url: str = DEFAULT_URL,
        timeout: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        self._name = name
        self._model = model
        self.timeout = timeout
        self._client = openai.AsyncOpenAI(
            api_key=api_key or NO_KEY,
            base_url=base_url.rstrip("/"),
            timeout=httpx2.Timeout(timeout, connect=min(timeout, 10.0)),
            max_retries=max_retries,
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> str:
        return self._model

    def __repr__(self) -> str:
        return f"ResponsesProvider(name={self._name!r}, model={self._model!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body = encode_request(request, model=self._model, stream=False)
        try:
            async with deadline(self._name, self.timeout):
                response = await self._client.post(
                    "/responses",
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
        except StreamFailed as exc:
            raise ModelError(self._name, f"the response failed: {exc}") from exc
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelError(self._name, f"the answer is not a Responses answer: {exc}") from exc

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        body = encode_request(request, model=self._model, stream=True)
        accumulator = StreamAccumulator(self._model)
        try:
            async with deadline(self._name, self.timeout):
                events = await self._client.post(
                    "/responses",
                    cast_to=dict[str, Any],
                    content=body,
                    options={"headers": _JSON},
                    stream=True,
                    stream_cls=openai.AsyncStream[dict[str, Any]],
                )
            async with events:
                async for event in events:
                    text = accumulator.add(event)
                    if text:
                        yield TextDelta(text)
            final = accumulator.result()
        except openai.OpenAIError as exc:
            raise translate_error(self._name, exc, self.timeout) from exc
        except StreamFailed as exc:
            raise ModelError(self._name, f"the response failed: {exc}") from exc
        yield final

    async def aclose(self) -> None:
        await self._client.close()
