"""ankka's retry layer for a turn's calls (providers/retry.py), on a provider failing as told."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from ankka._kernel.errors import (
    ModelAuthenticationError,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
)
from ankka.runtime.providers.base import ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.retry import Retrying, RetryPolicy
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


def _retrying(inner: Failing, seen: Seen) -> Retrying:
    return Retrying(inner, RetryPolicy(retries=2), seen.retried, seen.sleep)


async def test_a_failed_call_is_made_again_twice_with_doubling_pauses_and_counted() -> None:
    inner, seen = Failing([_down(), _down()]), Seen()
    assert await _retrying(inner, seen).complete(REQUEST) == ANSWER
    assert inner.calls == 3
    assert seen.pauses == [0.5, 1.0]
    assert seen.retries == [("default", "m", "model_unavailable")] * 2


async def test_after_the_last_retry_the_error_is_the_callers() -> None:
    inner, seen = Failing([_down(), _down(), _down(), _down()]), Seen()
    with pytest.raises(ModelUnavailable):
        await _retrying(inner, seen).complete(REQUEST)
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
        await _retrying(inner, seen).complete(REQUEST)
    assert (inner.calls, seen.retries) == (1, [])


async def test_a_stream_is_retried_before_its_first_event_only() -> None:
    inner, seen = Failing([_down()]), Seen()
    got = [item async for item in _retrying(inner, seen).stream(REQUEST)]
    assert got == [ANSWER]
    assert inner.calls == 2
    cut = Failing([], fail_mid_stream=True)
    items: list[object] = []

    async def read() -> None:
        async for item in _retrying(cut, seen).stream(REQUEST):
            items.append(item)

    with pytest.raises(ModelUnavailable):
        await read()
    assert (cut.calls, items) == (1, [TextDelta("o")])
