"""The scripted provider honours every key of the script format it shares with the stand-in
(issue 13, defect 10): a scripted error is an error, a delay waits on the injected clock,
``when`` picks the turn that fits, and reasoning comes back as provider state."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from ankka._kernel.errors import (
    ModelAuthenticationError,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
)
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.providers.base import ModelRequest
from ankka.runtime.providers.scripted import (
    REASONING_WIRE,
    ManualClock,
    ScriptedProvider,
    ScriptExhausted,
)
from ankka.runtime.records.messages import AssistantMessage, ToolCall, ToolResult, UserMessage

HELLO = ModelRequest("", [UserMessage("hello")])
AFTER_TOOL = ModelRequest(
    "",
    [
        UserMessage("hello"),
        AssistantMessage(None, (ToolCall("c1", "f", "{}"),)),
        ToolResult("c1", "f", "42"),
    ],
)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (503, ModelUnavailable),
        (429, ModelUnavailable),
        (401, ModelAuthenticationError),
        (504, ModelTimeout),
        (400, ModelError),
    ],
)
async def test_a_scripted_status_raises_what_an_http_provider_raises(
    status: int, error: type[ModelError]
) -> None:
    provider = ScriptedProvider([{"status": status, "text": "overloaded"}], name="brain")

    with pytest.raises(error) as raised:
        await provider.complete(HELLO)

    assert type(raised.value) is error
    assert raised.value.http_status == status
    assert raised.value.provider == "brain"
    assert "overloaded" in str(raised.value)


async def test_a_scripted_status_fails_a_stream_before_any_text() -> None:
    provider = ScriptedProvider([{"status": 503}])
    seen: list[Any] = []

    async def drain() -> None:
        async for event in provider.stream(HELLO):
            seen.append(event)

    with pytest.raises(ModelUnavailable):
        await drain()
    assert seen == []


async def test_a_delay_waits_on_the_injected_clock() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    provider = ScriptedProvider([{"text": "late", "delay_ms": 1500}], clock=clock)

    answer = asyncio.ensure_future(provider.complete(HELLO))
    await asyncio.sleep(0)
    clock.advance(1.0)
    await asyncio.sleep(0)
    assert not answer.done()
    assert clock.sleeping == 1

    clock.advance(0.5)
    assert (await answer).content == "late"
    assert clock.sleeping == 0


async def test_when_serves_the_first_unserved_turn_that_fits() -> None:
    provider = ScriptedProvider(
        [{"text": "after the tool", "when": "tool"}, {"text": "to the user", "when": "user"}]
    )

    assert (await provider.complete(HELLO)).content == "to the user"
    assert (await provider.complete(AFTER_TOOL)).content == "after the tool"


async def test_contains_serves_a_turn_only_to_a_request_carrying_its_text() -> None:
    provider = ScriptedProvider(
        [{"text": "for the tool's answer", "contains": "sunny"}, {"text": "hi", "contains": "hel"}]
    )

    assert (await provider.complete(HELLO)).content == "hi"
    call = AssistantMessage(None, (ToolCall("c1", "f", "{}"),))
    sunny = ModelRequest("", [UserMessage("weather?"), call, ToolResult("c1", "f", "sunny")])
    assert (await provider.complete(sunny)).content == "for the tool's answer"


async def test_no_turn_fitting_the_request_fails_loudly_naming_the_role() -> None:
    provider = ScriptedProvider([{"text": "after the tool", "when": "tool"}])

    with pytest.raises(ScriptExhausted) as exhausted:
        await provider.complete(HELLO)

    assert "'user'" in str(exhausted.value)
    assert provider.remaining == 1


async def test_reasoning_comes_back_as_the_answers_provider_state() -> None:
    provider = ScriptedProvider([{"text": "42", "reasoning": "six times seven"}])

    answer = await provider.complete(HELLO)

    assert answer.provider_state is not None
    assert answer.provider_state.wire == REASONING_WIRE
    assert answer.provider_state.items == ({"type": "reasoning", "text": "six times seven"},)


async def test_a_scripted_503_fails_the_turn_and_writes_nothing(make_runtime: Any) -> None:
    service = Service("s")

    @service.agent("a")
    def agent(request: TurnRequest) -> Turn:
        return Turn(message=request.message)

    runtime, _ = await make_runtime(service, [{"status": 503, "text": "overloaded"}])

    with pytest.raises(ModelUnavailable):
        await runtime.run(runtime.plan("a", "s1", "hello"))
    assert await runtime.context.journal.read("s1") == []
