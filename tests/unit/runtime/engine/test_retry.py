"""The one retry layer, the executor's (engine/executor.py), with a request turn's policy
(providers/retry.TurnRetry), on a provider failing as told."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from ankka._kernel.clock import SystemClock
from ankka._kernel.errors import (
    ModelAuthenticationError,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
)
from ankka.runtime.engine.executor import Executor
from ankka.runtime.providers.base import ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.retry import RetryPolicy, TurnRetry
from ankka.runtime.records.messages import Usage

ANSWER = ModelResponse("ok", (), Usage(), "m")
REQUEST = ModelRequest(instructions="", messages=())


@dataclass
class Failing:
    """Raises the errors it is given, in order, then answers; counts the calls."""

    errors: list[ModelError]
    calls: int = 0
    fail_mid_stream: bool = False
    name: str = "default"
    model: str = "m"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return ANSWER

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        self.calls += 1
        if self.fail_mid_stream:
            yield TextDelta("o")
            raise ModelUnavailable("default", "cut off")
        if self.errors:
            raise self.errors.pop(0)
        yield ANSWER

    async def aclose(self) -> None:
        return None


@dataclass
class Seen:
    retries: list[tuple[str, str, str]] = field(default_factory=list)
    pauses: list[float] = field(default_factory=list)

    def retried(self, provider: str, model: str, kind: str) -> None:
        self.retries.append((provider, model, kind))

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)


def _down() -> ModelUnavailable:
    return ModelUnavailable("default", "down", http_status=503)


async def _call(inner: Failing, seen: Seen, *, stream: bool = False) -> list[object]:
    """One model call through the executor, the turn's policy its retry; what it streamed
    (the answer last)."""
    executor = Executor(clock=SystemClock(), judges={}, retried=seen.retried)
    shown: list[object] = []

    async def emit(item: object) -> None:
        shown.append(item)

    answer = await executor.call(
        inner,
        REQUEST,
        agent="a",
        turn="t",
        ledger=executor.ledger(),
        emit=emit if stream else None,
        retry=TurnRetry(RetryPolicy(retries=2), seen.sleep),
    )
    return [*shown, answer.content]


async def test_a_failed_call_is_made_again_twice_with_doubling_pauses_and_counted() -> None:
    inner, seen = Failing([_down(), _down()]), Seen()
    assert await _call(inner, seen) == ["ok"]
    assert inner.calls == 3
    assert seen.pauses == [0.5, 1.0]
    assert seen.retries == [("default", "m", "model_unavailable")] * 2


async def test_after_the_last_retry_the_error_is_the_callers() -> None:
    inner, seen = Failing([_down(), _down(), _down(), _down()]), Seen()
    with pytest.raises(ModelUnavailable):
        await _call(inner, seen)
    assert inner.calls == 3


@pytest.mark.parametrize(
    "error",
    [
        ModelTimeout("default", "no answer within 120s"),  # it spent its whole timeout
        ModelAuthenticationError("default", "bad key", http_status=401),
        ModelError("default", "bad request", http_status=400),
    ],
)
async def test_what_a_retry_cannot_mend_is_not_retried(error: ModelError) -> None:
    inner, seen = Failing([error]), Seen()
    with pytest.raises(type(error)):
        await _call(inner, seen)
    assert (inner.calls, seen.retries) == (1, [])


async def test_a_stream_is_retried_before_its_first_event_only() -> None:
    inner, seen = Failing([_down()]), Seen()
    assert await _call(inner, seen, stream=True) == ["ok"]
    assert inner.calls == 2
    cut = Failing([], fail_mid_stream=True)
    with pytest.raises(ModelUnavailable):
        await _call(cut, seen, stream=True)
    assert cut.calls == 1  # the caller saw part of an answer: not made again
