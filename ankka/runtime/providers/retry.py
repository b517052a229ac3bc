"""ankka's one retry layer for a turn's model calls; the SDKs' own retries are off.

The ``openai`` and ``anthropic`` SDKs retry a failed request twice by default, under whatever
ankka did above them: a task's five failed attempts were fifteen HTTP requests. So every SDK
client is made with ``max_retries=0`` and ankka decides, once, where a call is tried again:

- a request agent's turn: :class:`Retrying` around each configured model (``ankka serve``
  wraps the runtime's providers): a call that failed with a retryable
  :class:`~ankka._kernel.errors.ModelError` (down, 5xx, 408, 429) is made again after a
  doubling pause, at most ``retries`` times (2: the SDKs' former default). A call that timed
  out is not: it spent its whole ``_TIMEOUT`` already, and the caller waits. A stream is
  retried only before its first event (after that the caller has seen part of an answer);
- an autonomous agent's task: the iteration loop (``drivers/tasks/iteration.py``) retries a
  failed iteration after its own growing pause, within ``max_consecutive_failures``; its
  providers are not wrapped, so one failed attempt is one request.

Both count each retry through ``retried(provider, model, kind)``, which ``ankka serve`` points
at ``ankka_model_retries_total`` on ``/metrics``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from ankka._kernel.errors import ModelError, ModelTimeout
from ankka.runtime.providers.base import ModelProvider, ModelRequest, ModelResponse, TextDelta

__all__ = ["Retried", "RetryPolicy", "Retrying", "retrying"]

Retried = Callable[[str, str, str], None]  # (provider, model, error kind)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """At most ``retries`` more attempts, after ``first_pause`` seconds, doubling, capped."""

    retries: int = 2
    first_pause: float = 0.5
    max_pause: float = 8.0

    def pause(self, attempt: int) -> float:
        """The pause before retry number ``attempt`` (1, 2, ...)."""
        return float(min(self.max_pause, self.first_pause * 2 ** max(0, attempt - 1)))


def _again(exc: ModelError) -> bool:
    return exc.retryable and not isinstance(exc, ModelTimeout)


@dataclass(slots=True)
class Retrying:
    """``inner``, with a failed call made again by :class:`RetryPolicy`."""

    inner: ModelProvider
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    retried: Retried | None = None
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def model(self) -> str:
        return self.inner.model

    async def _failed(self, exc: ModelError, attempt: int) -> None:
        """Pause before retry ``attempt``, or raise ``exc`` when there is none to make."""
        if attempt > self.policy.retries or not _again(exc):
            raise exc
        if self.retried is not None:
            self.retried(self.inner.name, self.inner.model, exc.kind)
        await self.sleep(self.policy.pause(attempt))

    async def complete(self, request: ModelRequest) -> ModelResponse:
        attempt = 0
        while True:
            try:
                return await self.inner.complete(request)
            except ModelError as exc:
                attempt += 1
                await self._failed(exc, attempt)

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        attempt = 0
        while True:
            started = False
            try:
                async for item in self.inner.stream(request):
                    started = True
                    yield item
                return
            except ModelError as exc:
                if started:
                    raise
                attempt += 1
                await self._failed(exc, attempt)

    async def aclose(self) -> None:
        await self.inner.aclose()


def retrying(
    providers: Mapping[str, ModelProvider],
    *,
    retried: Retried | None = None,
    policy: RetryPolicy | None = None,
) -> dict[str, ModelProvider]:
    """Each of ``providers`` wrapped in :class:`Retrying` (one policy, one counter)."""
    chosen = policy or RetryPolicy()
    return {name: Retrying(p, chosen, retried) for name, p in providers.items()}
