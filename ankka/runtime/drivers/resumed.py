"""A resumed turn's model, each call of which is journaled as its answer returns.

The resumer hands the loop this provider in place of the turn's own: after every answer (and
before the loop runs a tool on it or calls again) the call is appended to the session as a
:class:`~.records.ResumedCall`, under the turn lock the resume holds. A process killed later in
the resume leaves those records; whoever ends the cut-off turn accounts for them with the calls
from before its suspension (:meth:`~.state.Suspension.all_calls`). One fsync per model call,
on resumed turns only.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from ankka._kernel.clock import Clock
from ankka.runtime.providers.base import (
    ModelProvider,
    ModelRequest,
    ModelResponse,
    TextDelta,
    stream_by_completing,
)
from ankka.runtime.records.messages import ModelCall

__all__ = ["RecordingProvider"]

log = logging.getLogger("ankka.approvals")


@dataclass(frozen=True, slots=True)
class RecordingProvider:
    """``inner`` as the resumed turn's model; ``record`` is awaited with each call made."""

    inner: ModelProvider
    agent: str
    record: Callable[[ModelCall], Awaitable[None]]
    clock: Clock

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def model(self) -> str:
        return self.inner.model

    async def complete(self, request: ModelRequest) -> ModelResponse:
        started = self.clock.monotonic()
        response = await self.inner.complete(request)
        try:
            await self.record(self._call(response, started))
        except Exception as exc:
            # The record only guards against a crash later in the resume; the call still
            # reaches the loop, which accounts it when the turn ends. Failing the turn here
            # would drop both the answer and that accounting.
            log.warning(
                "could not journal a resumed call of %s (%s); it is accounted at the turn's end",
                self.agent,
                type(exc).__name__,
            )
        return response

    def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        """A resumed turn answers its decision whole, so it never streams; for the protocol,
        one completion (recorded as any other)."""
        return stream_by_completing(self, request)

    async def aclose(self) -> None:
        """Nothing of its own: the inner provider is the runtime's, closed with it."""

    def _call(self, response: ModelResponse, started: float) -> ModelCall:
        # As the loop accounts the same call (ankka.runtime.engine.loop.run_turn).
        return ModelCall(
            provider=self.inner.name,
            model=response.model or self.inner.model,
            agent=self.agent,
            latency_ms=(self.clock.monotonic() - started) * 1000.0,
            usage=response.usage,
        )
