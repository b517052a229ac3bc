"""The Chat Completions provider: any OpenAI-compatible server, over the official ``openai`` SDK.

The SDK is the transport (:mod:`.openai_transport`: pooling, retries, SSE framing, error
translation); ankka builds the request bytes and reads the answers itself (:mod:`.chat_wire`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2

from ankka._kernel.errors import ModelError
from ankka.runtime.declare.judgments.seam import JudgmentProvider
from ankka.runtime.providers.base import CapabilitiesProbe, ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.chat_wire import (
    StreamAccumulator,
    encode_request,
    read_response,
)
from ankka.runtime.providers.logprob_judge import LogprobJudgmentProvider
from ankka.runtime.providers.openai_transport import NO_KEY, OpenAITransport
from ankka.runtime.providers.prefixes import EncodedPrefixes

__all__ = ["NO_KEY", "ChatCompletionsProvider"]


class ChatCompletionsProvider:
    gen_ai_provider = "openai"  # gen_ai.provider.name: the API it speaks (OpenAI's)

    def __init__(
        self,
        *,
        name: str,
        model: str,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 0,  # ankka retries (providers/retry.py), never the SDK too
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        self._name = name
        self._model = model
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._encoded = EncodedPrefixes()  # a session's sent prefix, spliced into its next
        self._transport = OpenAITransport(
            provider=name,
            base_url=self.base_url,
            api_key=api_key,
            timeout=timeout,
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
        body = encode_request(request, model=self._model, stream=False, memo=self._encoded)
        data = await self._transport.post_json("/chat/completions", body)
        try:
            return read_response(data, model=self._model)
        except (ValueError, KeyError, TypeError) as exc:
            raise ModelError(
                self._name, f"the answer is not a Chat Completions answer: {exc}"
            ) from exc

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        body = encode_request(request, model=self._model, stream=True, memo=self._encoded)
        accumulator = StreamAccumulator(self._model)
        async for chunk in self._transport.post_events("/chat/completions", body):
            text = accumulator.add(chunk)
            if text:
                yield TextDelta(text)
        yield accumulator.result()

    async def post_json(self, path: str, body: bytes) -> dict[str, Any]:
        """POST raw bytes to the server through this provider's transport (the judgment
        provider asks its questions this way, sharing the connection pool and the errors)."""
        return await self._transport.post_json(path, body)

    def judgment_provider(
        self, capabilities: CapabilitiesProbe | None = None
    ) -> JudgmentProvider | None:
        """Judgments over this server's logprobs. A probe in front of it (Ollama's
        ``/api/show``) does not report logprobs, so it is not asked: a server that answers
        without them is refused after the fact."""
        return LogprobJudgmentProvider(name=self.name, model=self.model, transport=self)

    async def aclose(self) -> None:
        await self._transport.aclose()
