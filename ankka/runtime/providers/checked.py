"""The capability check: refuse, before sending, a request the model cannot serve.

Wraps a provider whose server answers Ollama's ``/api/show`` (an installation model through
the gateway, an Ollama server). The first call for the model asks what it can do; a success
is kept for the provider's life, a failure is not (the next call asks again, so a model that
was still loading is not refused for ever). A request that needs tools, or a reasoning effort
that is not among the model's thinking values, is refused with :class:`Refused` naming the
model and the missing capability, and nothing is sent. Called by the registry; the decision
itself is :func:`ankka.api.capabilities.missing_for_request`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx2

from ankka._kernel.errors import ModelUnavailable, Refused
from ankka.api.capabilities import ModelCapabilities, ProbeError, missing_for_request, probe
from ankka.runtime.declare.judgments.seam import JudgmentProvider
from ankka.runtime.providers.base import (
    AnswersJudgments,
    CapabilitiesProbe,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    TextDelta,
)

__all__ = ["CapabilityCheck", "Probe", "ollama_probe"]

Probe = Callable[[], Awaitable[ModelCapabilities]]


class CapabilityCheck:
    def __init__(
        self,
        inner: ModelProvider,
        *,
        probe: Probe,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._inner = inner
        self._probe = probe
        self._on_close = on_close
        self._known: ModelCapabilities | None = None
        self._lock = asyncio.Lock()
        self.probes = 0  # how many times /api/show was asked (visible for tests and metrics)

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def model(self) -> str:
        return self._inner.model

    @property
    def gen_ai_provider(self) -> str:
        return str(getattr(self._inner, "gen_ai_provider", "_OTHER"))

    @property
    def inner(self) -> ModelProvider:
        """The provider this check guards (the judgment provider shares its transport)."""
        return self._inner

    def __repr__(self) -> str:
        return f"CapabilityCheck({self._inner!r})"

    async def capabilities(self) -> ModelCapabilities:
        if self._known is not None:
            return self._known
        async with self._lock:
            if self._known is None:
                self.probes += 1
                try:
                    found = await self._probe()
                except ProbeError as exc:
                    raise ModelUnavailable(
                        self.name,
                        f"{exc}; the request was not sent (it will be asked again on the "
                        "next call)",
                    ) from exc
                self._known = found
            return self._known

    async def check(self, request: ModelRequest) -> None:
        caps = await self.capabilities()
        missing = missing_for_request(
            caps, tools=bool(request.tools), effort=request.reasoning_effort
        )
        if missing is not None:
            raise Refused(
                f"model {self.model!r} cannot serve this request: it lacks {missing}; the "
                "request was not sent. Use a model that offers it, or drop it from the agent",
                by=f"the capability check of model provider {self.name!r}",
            )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await self.check(request)
        return await self._inner.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        await self.check(request)
        async for item in self._inner.stream(request):
            yield item

    def judgment_provider(
        self, capabilities: CapabilitiesProbe | None = None
    ) -> JudgmentProvider | None:
        """The wrapped model's judgments, given this check's probe."""
        inner = self._inner
        if not isinstance(inner, AnswersJudgments):
            return None
        return inner.judgment_provider(self.capabilities)

    async def aclose(self) -> None:
        await self._inner.aclose()
        if self._on_close is not None:
            await self._on_close()


def ollama_probe(client: httpx2.AsyncClient, *, address: str, model: str) -> Probe:
    """A probe asking ``<address>/api/show`` through ``client``."""

    async def ask() -> ModelCapabilities:
        return await probe(client, kind="ollama", url=address, model=model)

    return ask
