"""When a failed model call is made again: the policies; the SDKs' own retries are off.

The ``openai`` and ``anthropic`` SDKs retry a failed request twice by default, under whatever
ankka did above them: a task's five failed attempts were fifteen HTTP requests. So every SDK
client is made with ``max_retries=0`` and ankka decides, once, where a call is tried again:

The retrying itself is the engine's executor's (:meth:`ankka.runtime.engine.executor.
Executor.call`), once for every kind of work, each driver giving its policy:

- a request agent's turn: :class:`TurnRetry`: a call that failed with a retryable
  :class:`~ankka._kernel.errors.ModelError` (down, 5xx, 408, 429) is made again after a
  doubling pause, at most ``retries`` times (2: the SDKs' former default). A call that timed
  out is not: it spent its whole ``_TIMEOUT`` already, and the caller waits. A stream is
  retried only before its first event (after that the caller has seen part of an answer);
- an autonomous agent's task: the task driver (``drivers/tasks/iteration.py``) retries a
  failed iteration after its own growing pause, within ``max_consecutive_failures``, without
  spending budget.

The executor counts each retry through ``retried(provider, model, kind)``, which ``ankka
serve`` points at ``ankka_model_retries_total`` on ``/metrics``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ankka._kernel.errors import ModelError, ModelTimeout

__all__ = ["Retried", "RetryPolicy", "TurnRetry"]

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
class TurnRetry:
    """A request turn's answer to a failed model call (the engine's ``Retry``): made again
    after the policy's pause, at most ``policy.retries`` times a call; never a call that
    timed out (it spent its whole ``_TIMEOUT``: the caller waits), nor one that is not
    ``retryable``."""

    policy: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    async def failed(self, error: ModelError, attempt: int) -> None:
        if attempt > self.policy.retries or not _again(error):
            raise error
        await self.sleep(self.policy.pause(attempt))
