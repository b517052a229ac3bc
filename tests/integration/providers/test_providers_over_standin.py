"""Every provider through its real SDK, over real HTTP, against the stand-in process.

Parametrized over the three wire protocols (Anthropic Messages, OpenAI Responses, Chat
Completions): the same script must come back as the same ankka values whatever the wire.
"""

from __future__ import annotations

import json

import pytest

from ankka.runtime.declare.tools import ToolSpec
from ankka.runtime.providers.base import ModelProvider, ModelRequest, ModelResponse, TextDelta
from ankka.runtime.records.messages import AssistantMessage, Message, ToolResult, UserMessage
from tests.integration.providers.conftest import WIRES, Build, Standin, settings_for

pytestmark = pytest.mark.integration

WEATHER = ToolSpec(
    "get_weather",
    "The weather in a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ASK = ModelRequest("You answer briefly.", [UserMessage("Weather in Oslo?")], [WEATHER])
USAGE = {"input_tokens": 40, "output_tokens": 7, "cache_read_tokens": 30, "cache_write_tokens": 5}
CALL = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo", "days": [1, 2]}}]}


async def collect(provider: ModelProvider, request: ModelRequest) -> tuple[str, ModelResponse]:
    texts: list[str] = []
    final: list[ModelResponse] = []
    async for item in provider.stream(request):
        if isinstance(item, TextDelta):
            texts.append(item.text)
        else:
            final.append(item)
    assert len(final) == 1, "a stream ends with exactly one whole answer"
    return "".join(texts), final[0]


@pytest.fixture(params=WIRES)
def wire(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_a_plain_answer_comes_back_with_its_usage(
    wire: str, standin: Standin, build: Build
) -> None:
    standin.script([{"text": "Sunny.", "usage": USAGE}])
    provider = build("main", **settings_for(wire, standin))

    answer = await provider.complete(ASK)

    assert answer.content == "Sunny."
    assert answer.tool_calls == ()
    assert answer.usage.input_tokens == 40
    assert answer.usage.output_tokens == 7
    assert answer.usage.cache_read_tokens == 30
    if wire != "openai":  # OpenAI's Responses reports no cache writes
        assert answer.usage.cache_write_tokens == 5


async def test_tool_call_arguments_arrive_as_json(
    wire: str, standin: Standin, build: Build
) -> None:
    standin.script([CALL])
    provider = build("main", **settings_for(wire, standin))

    answer = await provider.complete(ASK)

    (call,) = answer.tool_calls
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Oslo", "days": [1, 2]}


async def test_a_stream_yields_text_deltas_then_the_whole_answer(
    wire: str, standin: Standin, build: Build
) -> None:
    standin.script([{"text": "It is sunny in Oslo.", "usage": USAGE}])
    provider = build("main", **settings_for(wire, standin))

    deltas: list[str] = []
    async for item in provider.stream(ASK):
        if isinstance(item, TextDelta):
            deltas.append(item.text)
        else:
            final = item

    assert len(deltas) > 1, "the text arrives in pieces"
    assert "".join(deltas) == "It is sunny in Oslo."
    assert final.content == "It is sunny in Oslo."
    assert final.usage.output_tokens == 7
    assert final.usage.cache_read_tokens == 30


async def test_a_streamed_tool_call_is_assembled_from_its_deltas(
    wire: str, standin: Standin, build: Build
) -> None:
    standin.script([CALL])
    provider = build("main", **settings_for(wire, standin))

    text, answer = await collect(provider, ASK)

    assert text == ""
    (call,) = answer.tool_calls
    assert json.loads(call.arguments) == {"city": "Oslo", "days": [1, 2]}


async def test_the_tool_result_goes_back_answering_its_call(
    wire: str, standin: Standin, build: Build
) -> None:
    standin.script([CALL, {"text": "Sunny."}])
    provider = build("main", **settings_for(wire, standin))
    first = await provider.complete(ASK)
    (call,) = first.tool_calls
    history: list[Message] = [
        UserMessage("Weather in Oslo?"),
        AssistantMessage(first.content, first.tool_calls, provider_state=first.provider_state),
        ToolResult(call.id, call.name, "sunny, 21 C"),
    ]

    second = await provider.complete(ModelRequest("You answer briefly.", history, [WEATHER]))

    assert second.content == "Sunny."
    sent = json.dumps(standin.requests()[-1]["body"])
    assert call.id in sent
    assert "sunny, 21 C" in sent


async def test_a_reasoning_effort_reaches_the_server(
    wire: str, standin: Standin, build: Build
) -> None:
    standin.script([{"text": "Done."}])
    provider = build("main", **settings_for(wire, standin))

    await provider.complete(ModelRequest("", [UserMessage("Think.")], reasoning_effort="high"))

    body = standin.requests()[-1]["body"]
    if wire == "anthropic":
        assert body["thinking"]["type"] == "enabled"
        assert body["thinking"]["budget_tokens"] > 0
        assert body["max_tokens"] > body["thinking"]["budget_tokens"]
    elif wire == "openai":
        assert body["reasoning"] == {"effort": "high"}
    else:
        assert body["reasoning_effort"] == "high"


@pytest.mark.parametrize("wire_with_state", ["anthropic", "openai"])
@pytest.mark.parametrize("streamed", [False, True])
async def test_reasoning_is_replayed_within_the_turn_and_not_after_it(
    wire_with_state: str, streamed: bool, standin: Standin, build: Build
) -> None:
    wire = wire_with_state
    standin.script([{**CALL, "reasoning": "Oslo needs a lookup."}, {"text": "Sunny."}, "Again?"])
    provider = build("main", **settings_for(wire, standin))
    if streamed:
        _, first = await collect(provider, ASK)
    else:
        first = await provider.complete(ASK)
    assert first.provider_state is not None
    (call,) = first.tool_calls
    in_turn: list[Message] = [
        UserMessage("Weather in Oslo?"),
        AssistantMessage(None, first.tool_calls, provider_state=first.provider_state),
        ToolResult(call.id, call.name, "sunny"),
    ]
    await provider.complete(ModelRequest("", in_turn, [WEATHER]))
    next_turn: list[Message] = [*in_turn, AssistantMessage("Sunny."), UserMessage("And tomorrow?")]
    await provider.complete(ModelRequest("", next_turn, [WEATHER]))

    _, within, after = (json.dumps(r["body"]) for r in standin.requests())
    marker = "Oslo needs a lookup." if wire == "anthropic" else "rs_standin_1"
    assert marker in within, "the reasoning goes back while the turn's tool round is in flight"
    assert marker not in after, "an earlier turn's reasoning is never sent again"
    assert call.id in after, "the earlier call itself still goes back"


async def test_a_keyless_server_is_sent_the_bearer_none(standin: Standin, build: Build) -> None:
    standin.script(["Hi."])
    provider = build("local", **settings_for("openai-compatible", standin))

    await provider.complete(ASK)

    assert standin.requests()[-1]["headers"]["authorization"] == "Bearer none"


async def test_the_standins_when_reads_who_spoke_last_on_every_wire(
    wire: str, standin: Standin, build: Build
) -> None:
    # Listed answer-first: the stand-in must pick by the request's last speaker, not by order.
    standin.script([{"when": "tool", "text": "Sunny."}, {"when": "user", **CALL}])
    provider = build("main", **settings_for(wire, standin))

    first = await provider.complete(ASK)
    (call,) = first.tool_calls
    history: list[Message] = [
        UserMessage("Weather in Oslo?"),
        AssistantMessage(None, first.tool_calls),
        ToolResult(call.id, call.name, "sunny"),
    ]
    second = await provider.complete(ModelRequest("", history, [WEATHER]))

    assert second.content == "Sunny."
