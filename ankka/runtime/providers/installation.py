"""Installation models: the platform's own models, reached through the gateway over mTLS.

Preset ``installation`` names only a model. The address is ``$ANKKA_MODELS_ADDRESS/v1``
(Chat Completions), the credential is the service's client certificate from
``$ANKKA_TLS_DIR`` (:class:`~.mtls.RotatingClientTLS`: reloaded when the files change, and
trusting only the platform's CA and the URI SAN ``ankka://platform/models``). Each call asks
the TLS folder for its current context; when it changed, a new HTTP client is made for the
calls that follow (the old one is closed with the provider, so calls in flight finish).

The registry wraps this provider in :class:`~.checked.CapabilityCheck`, whose probe is
:meth:`InstallationProvider.capabilities` (``/api/show`` through the same mTLS client).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2

from ankka._kernel.errors import ModelUnavailable
from ankka.api.capabilities import ModelCapabilities, probe
from ankka.runtime.declare.judgments.seam import JudgmentProvider
from ankka.runtime.providers.base import CapabilitiesProbe, ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.chat_completions import ChatCompletionsProvider
from ankka.runtime.providers.checked import CapabilityCheck
from ankka.runtime.providers.lean_http import lean_client
from ankka.runtime.providers.logprob_judge import LogprobJudgmentProvider
from ankka.runtime.providers.mtls import MODELS_URI, RotatingClientTLS

__all__ = ["InstallationProvider", "installation_model"]


class InstallationProvider:
    gen_ai_provider = "openai"  # gen_ai.provider.name: the API it speaks (OpenAI's)

    def __init__(
        self,
        *,
        name: str,
        model: str,
        base_url: str,
        tls: RotatingClientTLS,
        timeout: float = 120.0,
    ) -> None:
        self._name = name
        self._model = model
        self.base_url = base_url.rstrip("/")
        self.address = self.base_url.removesuffix("/v1")
        self.timeout = timeout
        self.tls = tls
        self._generation = -1
        self._current: tuple[ChatCompletionsProvider, httpx2.AsyncClient] | None = None
        self._retired: list[ChatCompletionsProvider] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> str:
        return self._model

    def __repr__(self) -> str:
        return f"InstallationProvider(name={self._name!r}, model={self._model!r})"

    def _client(self) -> tuple[ChatCompletionsProvider, httpx2.AsyncClient]:
        context = self.tls.current()
        if self._current is None or self.tls.generation != self._generation:
            # One timeout for the whole client: no shorter transport default in front of
            # the model's own (httpx2's is 5 s).
            http = lean_client(
                httpx2.Timeout(self.timeout, connect=min(self.timeout, 10.0)), tls=context
            )
            inner = ChatCompletionsProvider(
                name=self._name,
                model=self._model,
                base_url=self.base_url,
                timeout=self.timeout,
                http_client=http,
            )
            if self._current is not None:
                self._retired.append(self._current[0])
            self._current = (inner, http)
            self._generation = self.tls.generation
        return self._current

    async def capabilities(self) -> ModelCapabilities:
        _, http = self._client()
        return await probe(http, kind="ollama", url=self.address, model=self._model)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        inner, _ = self._client()
        try:
            return await inner.complete(request)
        except ModelUnavailable as exc:
            raise self._with_hint(exc) from exc

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        inner, _ = self._client()
        try:
            async for item in inner.stream(request):
                yield item
        except ModelUnavailable as exc:
            raise self._with_hint(exc) from exc

    def judgment_provider(
        self, capabilities: CapabilitiesProbe | None = None
    ) -> JudgmentProvider | None:
        """Judgments over the gateway's model, checked first against what its ``/api/show``
        says of ``logprobs`` (the gateway's probe reports it)."""
        return LogprobJudgmentProvider(
            name=self.name, model=self.model, transport=self, capabilities=capabilities
        )

    async def post_json(self, path: str, body: bytes) -> dict[str, Any]:
        """POST raw bytes through the current mTLS client (the judgment provider's way in)."""
        inner, _ = self._client()
        try:
            return await inner.post_json(path, body)
        except ModelUnavailable as exc:
            raise self._with_hint(exc) from exc

    def _with_hint(self, exc: ModelUnavailable) -> ModelUnavailable:
        if exc.http_status is not None:
            return exc
        # No HTTP answer at all: over mTLS that is most often a certificate the gateway
        # would not take, so say where the certificate comes from.
        return ModelUnavailable(
            self._name,
            f"{exc.detail}; the gateway is {self.address}: check that it is up and that the "
            f"service's certificate in {self.tls.directory} was issued by the platform's CA "
            "and has not expired",
        )

    async def aclose(self) -> None:
        providers = [*self._retired, *([self._current[0]] if self._current else [])]
        self._retired.clear()
        self._current = None
        for provider in providers:
            await provider.aclose()


def installation_model(
    *,
    name: str,
    model: str,
    base_url: str,
    tls_dir: str,
    timeout: float = 120.0,
    expected_uri: str = MODELS_URI,
) -> CapabilityCheck:
    """The installation provider wrapped in the capability check (what the registry builds)."""
    tls = RotatingClientTLS(tls_dir, expected_uri=expected_uri)
    tls.current()  # read the certificate now, so a bad TLS folder is refused at start
    provider = InstallationProvider(
        name=name, model=model, base_url=base_url, tls=tls, timeout=timeout
    )
    return CapabilityCheck(provider, probe=provider.capabilities)
