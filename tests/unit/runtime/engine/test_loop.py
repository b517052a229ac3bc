"""The loop against the scripted provider: tools, guardrails, limits, typed answers, memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from ankka._kernel.errors import ConfigurationError, Refused, TurnFailed
from ankka.runtime.declare.agents import Memory, Service, Turn, TurnRequest
from ankka.runtime.declare.guardrails import Guardrail
from ankka.runtime.declare.tools import tool
from ankka.runtime.engine.executor import LoopEvent
from ankka.runtime.providers.base import TextDelta
from ankka.runtime.providers.scripted import ScriptExhausted
from ankka.runtime.records.messages import AssistantMessage, Message, ToolResult, UserMessage
from tests.unit.runtime.conftest import MakeRuntime, Script

CALL_OSLO = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}


@tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    if city == "Atlantis":
        raise LookupError("no station under water")
    return f"sunny in {city}"


def service_with(**turn_options: Any) -> Service:
    service = Service("test")

    @service.agent("weather")
    def weather(request: TurnRequest) -> Turn:
        return Turn(message=request.message, tools=[get_weather], **turn_options)

    return service


async def test_a_tool_round_runs_the_tool_and_sends_its_result_back(
    make_runtime: MakeRuntime,
) -> None:
    runtime, provider = await make_runtime(service_with(), [CALL_OSLO, {"text": "It is sunny."}])
    result = await runtime.run(runtime.plan("weather", "s", "Weather in Oslo?"))
    assert result.reply == "It is sunny."
    second = provider.requests[1].messages
    assert isinstance(second[-1], ToolResult)
    assert second[-1].content == "sunny in Oslo"
    assert not second[-1].is_error
    assert isinstance(second[-2], AssistantMessage)
    assert second[-1].call_id == second[-2].tool_calls[0].id


async def test_a_failing_tool_is_an_error_result_and_the_turn_goes_on(
    make_runtime: MakeRuntime,
) -> None:
    script: Script = [
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Atlantis"}}]},
        {"text": "I could not find Atlantis."},
    ]
    runtime, provider = await make_runtime(service_with(), script)
    result = await runtime.run(runtime.plan("weather", "s", "Weather in Atlantis?"))
    assert result.reply == "I could not find Atlantis."
    sent = provider.requests[1].messages[-1]
    assert isinstance(sent, ToolResult)
    assert sent.is_error
    assert "no station under water" in sent.content


async def test_arguments_that_do_not_decode_are_an_error_result(make_runtime: MakeRuntime) -> None:
    script: Script = [
        {"tool_calls": [{"name": "get_weather", "arguments": {"town": "Oslo"}}]},
        {"tool_calls": [{"name": "get_weather", "arguments": "{not json"}]},
        {"text": "Sorry."},
    ]
    runtime, provider = await make_runtime(service_with(), script)
    await runtime.run(runtime.plan("weather", "s", "Weather?"))
    first = provider.requests[1].messages[-1]
    second = provider.requests[2].messages[-1]
    assert isinstance(first, ToolResult) and first.is_error
    assert "city" in first.content and "did not decode" in first.content
    assert isinstance(second, ToolResult) and second.is_error


async def test_an_unknown_tool_is_an_error_result_naming_the_offered_tools(
    make_runtime: MakeRuntime,
) -> None:
    script: Script = [{"tool_calls": [{"name": "get_wether"}]}, {"text": "ok"}]
    runtime, provider = await make_runtime(service_with(), script)
    await runtime.run(runtime.plan("weather", "s", "Weather?"))
    result = provider.requests[1].messages[-1]
    assert isinstance(result, ToolResult) and result.is_error
    assert "get_wether" in result.content and "get_weather" in result.content


async def test_a_model_still_asking_for_tools_after_the_limit_fails_the_turn(
    make_runtime: MakeRuntime,
) -> None:
    runtime, provider = await make_runtime(service_with(max_tool_rounds=2), [CALL_OSLO] * 3)
    with pytest.raises(TurnFailed, match="after 2 tool rounds"):
        await runtime.run(runtime.plan("weather", "s", "Weather?"))
    assert len(provider.requests) == 3
    assert await runtime.messages("s") == []


async def test_the_default_limit_is_one_hundred_rounds(make_runtime: MakeRuntime) -> None:
    script: Script = [CALL_OSLO] * 100 + [{"text": "done"}]
    runtime, provider = await make_runtime(service_with(), script)
    result = await runtime.run(runtime.plan("weather", "s", "Weather?"))
    assert result.reply == "done"
    assert provider.remaining == 0


async def test_an_exhausted_script_fails_loudly(make_runtime: MakeRuntime) -> None:
    runtime, _ = await make_runtime(service_with(), [CALL_OSLO])
    with pytest.raises(ScriptExhausted, match="ran out"):
        await runtime.run(runtime.plan("weather", "s", "Weather?"))


def recording(name: str, log: list[str], refuse: bool = False) -> Guardrail:
    def check(text: str) -> str | None:
        log.append(name)
        return f"{name} says no" if refuse else None

    return Guardrail(name, check)


async def test_input_guardrails_run_in_order_and_stop_at_the_first_refusal(
    make_runtime: MakeRuntime,
) -> None:
    log: list[str] = []
    rails = [recording("a", log), recording("b", log, refuse=True), recording("c", log)]
    runtime, provider = await make_runtime(service_with(input_guardrails=rails), ["never"])
    with pytest.raises(Refused) as refused:
        await runtime.run(runtime.plan("weather", "s", "hello"))
    assert log == ["a", "b"]
    assert refused.value.reason == "b says no"
    assert "input guardrail 'b'" in str(refused.value)
    assert provider.requests == []  # refused before any model call


async def test_an_output_refusal_leaves_memory_untouched(make_runtime: MakeRuntime) -> None:
    log: list[str] = []
    service = Service("test")
    refuse = {"on": False}

    def no_secrets(text: str) -> str | None:
        log.append(text)
        return "mentions the secret" if refuse["on"] and "secret" in text else None

    @service.agent("a")
    def agent(request: TurnRequest) -> Turn:
        return Turn(
            message=request.message, output_guardrails=[Guardrail("no_secrets", no_secrets)]
        )

    runtime, _ = await make_runtime(service, ["first answer", "the secret is 42"])
    await runtime.run(runtime.plan("a", "s", "one"))
    before = await runtime.messages("s")
    refuse["on"] = True
    with pytest.raises(Refused, match="mentions the secret"):
        await runtime.run(runtime.plan("a", "s", "two"))
    assert await runtime.messages("s") == before
    assert log == ["first answer", "the secret is 42"]


class Forecast(BaseModel):
    city: str
    celsius: float


def typed_service() -> Service:
    service = Service("test")

    @service.agent("typed")
    def typed(request: TurnRequest) -> Turn:
        return Turn(message=request.message, answer=Forecast)

    return service


async def test_a_typed_answer_decodes_into_its_type(make_runtime: MakeRuntime) -> None:
    runtime, provider = await make_runtime(typed_service(), ['{"city": "Oslo", "celsius": 1.5}'])
    result = await runtime.run(runtime.plan("typed", "s", "Forecast?"))
    assert result.finished.value == Forecast(city="Oslo", celsius=1.5)
    assert result.reply == {"city": "Oslo", "celsius": 1.5}
    output = provider.requests[0].output
    assert output is not None and output.schema["properties"]["celsius"]["type"] == "number"


async def test_a_typed_answer_that_does_not_decode_fails_and_writes_nothing(
    make_runtime: MakeRuntime,
) -> None:
    runtime, _ = await make_runtime(typed_service(), ["It will be sunny, probably."])
    with pytest.raises(TurnFailed, match="Forecast"):
        await runtime.run(runtime.plan("typed", "s", "Forecast?"))
    assert await runtime.messages("s") == []


async def test_usage_is_summed_per_turn_and_attached_to_the_last_answer_only(
    make_runtime: MakeRuntime,
) -> None:
    script: Script = [
        {**CALL_OSLO, "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 4}},
        {
            "text": "sunny",
            "usage": {"input_tokens": 20, "output_tokens": 3, "cache_write_tokens": 5},
        },
    ]
    runtime, _ = await make_runtime(service_with(), script)
    result = await runtime.run(runtime.plan("weather", "s", "Weather?"))
    assert result.finished.usage.as_dict() == {
        "input_tokens": 30,
        "output_tokens": 5,
        "cache_read_tokens": 4,
        "cache_write_tokens": 5,
    }
    answers = [m for m in await runtime.messages("s") if isinstance(m, AssistantMessage)]
    assert [a.turn_usage for a in answers[:-1]] == [None]
    assert answers[-1].turn_usage == result.finished.usage
    assert [a.call.usage.input_tokens for a in answers if a.call] == [10, 20]
    summary = await runtime.summary("s")
    assert summary.usage == result.finished.usage and summary.turns == 1


def memory_service(memory: Memory, write: bool = True) -> Service:
    service = Service("test")

    @service.agent("reader")
    def reader(request: TurnRequest) -> Turn:
        return Turn(message=request.message, memory=memory, write_memory=write)

    @service.agent("writer")
    def writer(request: TurnRequest) -> Turn:
        return Turn(message=request.message)

    @service.agent("other")
    def other(request: TurnRequest) -> Turn:
        return Turn(message=request.message)

    return service


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.content or "" for m in messages]


@pytest.mark.parametrize(
    ("memory", "expected"),
    [
        (Memory.all(), ["w1", "a1", "o1", "a2", "w2", "a3", "now"]),
        (Memory.none(), ["now"]),
        (Memory.last(3), ["w2", "a3", "now"]),
        (Memory.last(2), ["w2", "a3", "now"]),
        (Memory.last(1), ["now"]),  # never starts mid-turn
        (Memory.from_agents("writer"), ["w1", "a1", "w2", "a3", "now"]),
        (Memory.from_agents("other"), ["o1", "a2", "now"]),
    ],
)
async def test_memory_read_policies(
    make_runtime: MakeRuntime, memory: Memory, expected: list[str]
) -> None:
    runtime, provider = await make_runtime(memory_service(memory), ["a1", "a2", "a3", "a4"])
    await runtime.run(runtime.plan("writer", "s", "w1"))
    await runtime.run(runtime.plan("other", "s", "o1"))
    await runtime.run(runtime.plan("writer", "s", "w2"))
    await runtime.run(runtime.plan("reader", "s", "now"))
    assert texts(provider.requests[-1].messages) == expected


async def test_an_agent_that_does_not_write_leaves_no_trace(make_runtime: MakeRuntime) -> None:
    runtime, _ = await make_runtime(memory_service(Memory.all(), write=False), ["a1", "a2"])
    await runtime.run(runtime.plan("writer", "s", "w1"))
    await runtime.run(runtime.plan("reader", "s", "routing chatter"))
    assert texts(await runtime.messages("s")) == ["w1", "a1"]


async def test_each_message_records_the_agent_that_wrote_it(make_runtime: MakeRuntime) -> None:
    runtime, _ = await make_runtime(memory_service(Memory.all()), ["a1", "a2"])
    await runtime.run(runtime.plan("writer", "s", "w1"))
    await runtime.run(runtime.plan("other", "s", "o1"))
    stored = await runtime.messages("s")
    assert [(type(m).__name__, m.agent) for m in stored] == [
        ("UserMessage", "writer"),
        ("AssistantMessage", "writer"),
        ("UserMessage", "other"),
        ("AssistantMessage", "other"),
    ]
    assert isinstance(stored[0], UserMessage)


async def test_stream_agents_emit_deltas_that_add_up_to_the_answer(
    make_runtime: MakeRuntime,
) -> None:
    service = Service("test")

    @service.agent("streamer")
    def streamer(request: TurnRequest) -> Turn:
        return Turn(message=request.message, answer="stream")

    runtime, _ = await make_runtime(service, ["It is sunny in Oslo today."])
    deltas: list[str] = []

    async def emit(event: LoopEvent) -> None:
        assert isinstance(event, TextDelta)
        deltas.append(event.text)

    result = await runtime.run(runtime.plan("streamer", "s", "Weather?"), emit=emit)
    assert len(deltas) > 1
    assert "".join(deltas) == result.reply == "It is sunny in Oslo today."


async def test_a_turns_output_token_limit_is_sent_with_every_model_call(
    make_runtime: MakeRuntime,
) -> None:
    runtime, provider = await make_runtime(
        service_with(max_output_tokens=64), [CALL_OSLO, {"text": "It is sunny."}]
    )
    await runtime.run(runtime.plan("weather", "s", "Weather in Oslo?"))
    assert [r.max_output_tokens for r in provider.requests] == [64, 64]
    unbounded, plain = await make_runtime(service_with(), [{"text": "ok"}])
    await unbounded.run(unbounded.plan("weather", "t", "hi"))
    assert plain.requests[0].max_output_tokens is None


@pytest.mark.parametrize("limit", [0, -1, True])
def test_an_output_token_limit_that_is_none_is_refused(limit: int) -> None:
    with pytest.raises(ConfigurationError, match="max_output_tokens must be a whole number"):
        Turn(message="hi", max_output_tokens=limit)
