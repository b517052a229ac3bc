"""The OpenAI Responses provider, for OpenAI's own API, over the ``openai`` SDK as transport.

OpenAI's reasoning models keep their reasoning between the calls of a tool round only through
Responses (Chat Completions drops it), so OpenAI's own API is spoken this way and every other
server through :mod:`.chat_completions`. ankka builds the request bytes and reads the answers
(:mod:`.responses_wire`); the SDK is the transport (:mod:`.openai_transport`, shared with the
Chat Completions provider: the same client set-up, deadline and error translation).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ankka._kernel.errors import ModelError
from ankka.runtime.providers.base import ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.failures import StreamFailed
from ankka.runtime.providers.openai_transport import OpenAITransport
from ankka.runtime.providers.prefixes import EncodedPrefixes
from ankka.runtime.providers.responses_wire import (
    StreamAccumulator,
    encode_request,
    read_response,
)

__all__ = ["DEFAULT_URL", "ResponsesProvider"]

DEFAULT_URL = "https://api.openai.com/v1"


class ResponsesProvider:
    gen_ai_provider = "openai"  # gen_ai.provider.name on its spans

    def __init__(
        self,
        *,
        name: str,
        model: str,
        api_key: str | None,
        base_url: str = DEFAULT_URL,
        timeout: float = 120.0,
        max_retries: int = 0,  # ankka retries (providers/retry.py), never the SDK too
    ) -> None:
        self._name = name
        self._model = model
        self.timeout = timeout
        self._encoded = EncodedPrefixes()  # a session's sent prefix, spliced into its next
        self._transport = OpenAITransport(
            provider=name,
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
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
        body = encode_request(request, model=self._model, stream=False, memo=self._encoded)
        data = await self._transport.post_json("/responses", body)
        try:
            return read_response(data, model=self._model)
        except StreamFailed as exc:
            raise ModelError(self._name, f"the response failed: {exc}") from exc
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelError(self._name, f"the answer is not a Responses answer: {exc}") from exc

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        body = encode_request(request, model=self._model, stream=True, memo=self._encoded)
        accumulator = StreamAccumulator(self._model)
        try:
            async for event in self._transport.post_events("/responses", body):
                text = accumulator.add(event)
                if text:
                    yield TextDelta(text)
            final = accumulator.result()
        except StreamFailed as exc:
            raise ModelError(self._name, f"the response failed: {exc}") from exc
        yield final

    async def aclose(self) -> None:
        await self._transport.aclose()
