"""The pure wire translations: what ankka sends and how it reads what comes back.

The stream tests fold the stand-in's own event renderings, so the renderers and the readers
are held to one another (the integration tests hold both to the real SDKs).
"""

from __future__ import annotations

import json

import pytest

from ankka._kernel.errors import RequestError
from ankka.local.standin import anthropic_messages, responses
from ankka.runtime.providers import anthropic_wire, responses_wire
from ankka.runtime.providers.base import ModelRequest, OutputSchema
from ankka.runtime.providers.failures import StreamFailed
from ankka.runtime.providers.script import parse_turn
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ProviderState,
    SummaryMessage,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)

CALL = ToolCall("call_1", "get_weather", '{"city":"Oslo"}')
THINKING = ProviderState("anthropic", ({"type": "thinking", "thinking": "t", "signature": "s"},))
REASONING = ProviderState("responses", ({"type": "reasoning", "id": "rs_1", "summary": []},))


def anthropic_body(messages: list[Message], **request: object) -> dict[str, object]:
    built = ModelRequest("", messages, **request)  # type: ignore[arg-type]
    body: dict[str, object] = json.loads(
        anthropic_wire.encode_request(built, model="c", max_tokens=100, stream=False)
    )
    return body


def test_anthropic_roles_alternate_tool_results_share_one_user_message() -> None:
    messages: list[Message] = [
        UserMessage("Weather?"),
        AssistantMessage(None, (CALL, ToolCall("call_2", "get_weather", '{"city":"Rome"}'))),
        ToolResult("call_1", "get_weather", "sunny"),
        ToolResult("call_2", "get_weather", "no such city", is_error=True),
    ]
    wire = anthropic_body(messages)["messages"]
    assert isinstance(wire, list)
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    results = wire[2]["content"]
    assert [r["tool_use_id"] for r in results] == ["call_1", "call_2"]
    assert results[1]["is_error"] is True
    assert wire[1]["content"][0]["input"] == {"city": "Oslo"}, "arguments go as a JSON object"


def test_anthropic_a_summary_and_the_next_question_are_one_user_message() -> None:
    wire = anthropic_body([SummaryMessage("They talked."), UserMessage("And now?")])["messages"]
    assert isinstance(wire, list)
    assert len(wire) == 1
    assert [b["text"] for b in wire[0]["content"]][1] == "And now?"


def test_anthropic_thinking_goes_back_only_after_the_last_user_message() -> None:
    earlier = AssistantMessage(None, (CALL,), provider_state=THINKING)
    messages: list[Message] = [
        UserMessage("one"),
        earlier,
        ToolResult("call_1", "get_weather", "sunny"),
        AssistantMessage("Sunny."),
        UserMessage("two"),
        AssistantMessage(None, (CALL,), provider_state=THINKING),
        ToolResult("call_1", "get_weather", "sunny"),
    ]
    wire = json.dumps(anthropic_body(messages))
    assert wire.count('"signature"') == 1


def test_anthropic_never_replays_another_wires_state() -> None:
    messages: list[Message] = [
        UserMessage("one"),
        AssistantMessage(None, (CALL,), provider_state=REASONING),
        ToolResult("call_1", "get_weather", "sunny"),
    ]
    assert "rs_1" not in json.dumps(anthropic_body(messages))


def test_anthropic_an_effort_becomes_a_thinking_budget_above_max_tokens() -> None:
    body = anthropic_body([UserMessage("hm")], reasoning_effort="medium")
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert body["max_tokens"] == 4196


def test_anthropic_an_unknown_effort_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(RequestError, match="low, medium, high"):
        anthropic_body([UserMessage("hm")], reasoning_effort="extreme")


def test_anthropic_a_typed_answer_is_asked_for_in_the_system_prompt() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    body = anthropic_body([UserMessage("n?")], output=OutputSchema("N", schema))
    assert json.dumps(schema, separators=(",", ":")) in str(body["system"])


def test_anthropic_tool_input_is_read_as_json_not_a_rendering_of_a_mapping() -> None:
    answer = anthropic_wire.read_response(
        {
            "type": "message",
            "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"city": "Berlin"}}],
        },
        model="c",
    )
    assert json.loads(answer.tool_calls[0].arguments) == {"city": "Berlin"}


def test_responses_encodes_calls_results_and_the_current_turns_reasoning() -> None:
    messages: list[Message] = [
        UserMessage("Weather?"),
        AssistantMessage(None, (CALL,), provider_state=REASONING),
        ToolResult("call_1", "get_weather", "sunny"),
    ]
    built = ModelRequest("Be brief.", messages, reasoning_effort="low")
    body = json.loads(responses_wire.encode_request(built, model="gpt", stream=True))
    assert body["instructions"] == "Be brief."
    assert [i.get("type", i.get("role")) for i in body["input"]] == [
        "user",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert body["input"][2]["arguments"] == CALL.arguments, "arguments go back verbatim"
    assert body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]


def test_responses_a_failed_response_is_an_error_not_an_empty_answer() -> None:
    with pytest.raises(StreamFailed, match="quota"):
        responses_wire.read_response(
            {"status": "failed", "error": {"message": "quota"}, "output": []}, model="gpt"
        )


TURN = parse_turn(
    {
        "text": "It is sunny.",
        "reasoning": "look up",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
        "usage": {"input_tokens": 9, "output_tokens": 4, "cache_read_tokens": 2},
    },
    "turn 0",
)


def test_anthropic_stream_folds_to_the_same_answer_as_the_whole_message() -> None:
    accumulator = anthropic_wire.StreamAccumulator("c")
    texts = [
        accumulator.add(data) for _, data in anthropic_messages.events(TURN, model="c", number=1)
    ]
    streamed = accumulator.result()
    whole = anthropic_wire.read_response(
        anthropic_messages.answer(TURN, model="c", number=1), model="c"
    )

    assert "".join(t for t in texts if t) == "It is sunny."
    assert streamed == whole
    assert streamed.provider_state == whole.provider_state
    assert streamed.usage == Usage(9, 4, 2, 0)
    # The chat span's finish reason, in Anthropic's words, streamed or not.
    assert streamed.finish_reason == whole.finish_reason == "tool_use"


def test_responses_stream_folds_to_the_same_answer_as_the_whole_response() -> None:
    accumulator = responses_wire.StreamAccumulator("gpt")
    events = responses.events(TURN, model="gpt", number=1, created=0)
    texts = [accumulator.add(data) for _, data in events]
    streamed = accumulator.result()
    whole = responses_wire.read_response(
        responses.answer(TURN, model="gpt", number=1, created=0), model="gpt"
    )

    assert "".join(t for t in texts if t) == "It is sunny."
    assert streamed == whole
    assert streamed.provider_state == whole.provider_state
    assert streamed.finish_reason == whole.finish_reason == "completed"


def test_responses_an_incomplete_answer_says_why_it_stopped() -> None:
    body = {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
    answer = responses_wire.read_response({**body, "output": []}, model="gpt")
    assert answer.finish_reason == "max_output_tokens"


def test_responses_stream_without_a_completed_event_is_assembled_from_deltas() -> None:
    accumulator = responses_wire.StreamAccumulator("gpt")
    for _, data in responses.events(TURN, model="gpt", number=1, created=0):
        if data["type"] not in ("response.completed", "response.output_item.done"):
            accumulator.add(data)
    (call,) = accumulator.result().tool_calls
    assert json.loads(call.arguments) == {"city": "Oslo"}


def test_anthropic_usage_counts_cache_reads_and_writes_as_input() -> None:
    # Anthropic reports them apart from input_tokens; ankka's input_tokens is every input
    # token, as Chat Completions' prompt_tokens is.
    raw = {
        "input_tokens": 5,
        "output_tokens": 7,
        "cache_read_input_tokens": 30,
        "cache_creation_input_tokens": 5,
    }
    assert anthropic_wire.read_usage(raw) == Usage(40, 7, 30, 5)


def test_responses_keeps_only_reasoning_that_can_go_back_without_storage() -> None:
    body = {
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "x"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        ]
    }
    answer = responses_wire.read_response(body, model="gpt")
    assert answer.provider_state is not None
    assert [i["id"] for i in answer.provider_state.items] == ["rs_2"]


def test_a_bounded_answer_is_bounded_on_every_wire() -> None:
    from ankka.runtime.providers import chat_wire

    bounded = ModelRequest("Summarise.", (UserMessage("..."),), max_output_tokens=64)
    chat = json.loads(chat_wire.encode_request(bounded, model="m", stream=False))
    assert chat["max_tokens"] == 64
    answer = json.loads(responses_wire.encode_request(bounded, model="m", stream=False))
    assert answer["max_output_tokens"] == 64
    assert anthropic_body([UserMessage("...")], max_output_tokens=64)["max_tokens"] == 64
    assert anthropic_body([UserMessage("...")], max_output_tokens=500)["max_tokens"] == 100
    unbounded = ModelRequest("Chat.", (UserMessage("..."),))
    assert "max_tokens" not in json.loads(
        chat_wire.encode_request(unbounded, model="m", stream=False)
    )
