"""Spliced request bodies are byte-identical to whole encodings, on every wire.

A real runtime on SQLite, answered by the scripted provider, runs sessions the way they grow:
many turns, tool rounds, a compaction, a turn suspended for approval and resumed, a typed
answer, a restart (every message read back as a new object) and a memo too small to keep
everything, with reasoning on the answers of tool rounds. Every request the loop made is then
encoded twice on each wire (Chat Completions, Responses, Anthropic), in the order it was made:
once spliced (one :class:`EncodedPrefixes` across all of them, as a provider keeps it) and once
whole. The scripted reasoning is carried over to the wire under test (keeping each message's
identity, which the splice relies on), so Responses replays reasoning items and Anthropic
thinking blocks in the turn in flight and drops them once a user message follows; Anthropic
merges the tool results of a round, and a user message after a tool result, into one message.
Seeded random sessions (every kind of message, answers whose only content is thinking, state of
another wire) check the same at every step, interleaved in a cache that keeps three of four.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pydantic
import pytest

from ankka._kernel.clock import ManualClock
from ankka.runtime.compaction import Compaction
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.declare.tools import tool
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.providers import anthropic_wire, chat_wire, responses_wire
from ankka.runtime.providers.base import ModelRequest
from ankka.runtime.providers.chat_wire import encode_request
from ankka.runtime.providers.prefixes import EncodedPrefixes, Items
from ankka.runtime.providers.scripted import REASONING_WIRE, ScriptedProvider
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ProviderState,
    SummaryMessage,
    ToolCall,
    ToolResult,
    UserMessage,
)
from tests.support.runtimes import runtime_for
from tests.support.stores import journal_store

COMPACTION = Compaction(limit_chars=1200, keep_messages=4)


@tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}, 21°C — «clear»"


@tool(requires_approval=lambda args: args.amount > 100, approval_timeout=60)
def refund(order: str, amount: float) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order}"


class Verdict(pydantic.BaseModel):
    ok: bool
    why: str


def service() -> Service:
    s = Service("splice")

    @s.agent("chat")
    def chat(request: TurnRequest) -> Turn:
        return Turn(
            message=request.message,
            instructions="Chat, and use the tools.",
            tools=[get_weather, refund],
            compaction=COMPACTION,
            reasoning_effort="low",
        )

    @s.agent("typed")
    def typed(request: TurnRequest) -> Turn:
        return Turn(message=request.message, answer=Verdict)

    return s


def weather(*cities: str) -> dict[str, Any]:
    calls = [{"name": "get_weather", "arguments": {"city": c}} for c in cities]
    return {"tool_calls": calls, "reasoning": f"look up {' and '.join(cities)}"}


def refund_call(order: str, amount: float) -> dict[str, Any]:
    calls = [{"name": "refund", "arguments": {"order": order, "amount": amount}}]
    return {"tool_calls": calls, "reasoning": "a refund over 100 needs approval"}


async def runtime_on(path: Path, script: Sequence[dict[str, Any] | str]) -> Runtime:
    provider = ScriptedProvider(script, name="default")
    summary = "So far: weather in Oslo Turku Pori Vaasa; refund A1 250 250.0; 0 1 2 3 4 5 6 7."
    summariser = ScriptedProvider([summary] * 4, name="default")
    store = await journal_store(path)  # the runtime's aclose closes the Store
    runtime = runtime_for(
        service(),
        store=store,
        providers={"default": provider},
        compaction_providers={"default": summariser},
        clock=ManualClock(datetime(2026, 12, 1, 8, 0, tzinfo=UTC)),
        approvals=store.store.approvals,
        approval_tick_seconds=3600,
    )
    await runtime.__aenter__()
    return runtime


async def close(runtime: Runtime) -> list[ModelRequest]:
    provider = runtime.context.providers["default"]
    assert isinstance(provider, ScriptedProvider) and provider.remaining == 0
    await runtime.aclose()
    return list(provider.requests)


async def chat(runtime: Runtime, session: str, message: str) -> None:
    await runtime.run(runtime.plan("chat", session, message))
    await runtime.context.compactor.idle()


async def sessions(tmp_path: Path) -> list[ModelRequest]:
    """The requests of two sessions interleaved, across a restart, in the order made."""
    path = tmp_path / "journal.sqlite3"
    first: list[dict[str, Any] | str] = [
        weather("Oslo"),
        "Oslo is sunny.",
        weather("Turku", "Pori"),
        weather("Vaasa"),
    ]
    first += ["All sunny.", '{"ok": true, "why": "ja"}', refund_call("A1", 250), "Refunded."]
    first += [f"answer {n} " + "z" * 120 for n in range(8)]
    runtime = await runtime_on(path, first)
    await chat(runtime, "s", "Weather in Oslo?")
    await chat(runtime, "t", "And Turku, Pori, Vaasa?")
    await runtime.run(runtime.plan("typed", "s", "Was that right?"))
    suspended = await runtime.run(runtime.plan("chat", "s", "Refund A1, please"))
    (request,) = suspended.awaiting
    await runtime.approvals.decide(request.id, "approved", request.digest, decided_by="ann")
    for n in range(8):  # past the limit: compacted, then growing on the summary
        await chat(runtime, "s" if n % 3 else "t", f"question {n} " + "q" * 120)
    requests = await close(runtime)
    again = await runtime_on(path, [weather("Oslo"), "Still sunny.", "bye", "bye again"])
    await chat(again, "s", "Oslo again?")  # the fold read back: new message objects
    await chat(again, "t", "Goodbye")
    await chat(again, "s", "Goodbye")
    return requests + await close(again)


Encode = Callable[..., bytes]


def anthropic_encode(request: ModelRequest, **kwargs: Any) -> bytes:
    return anthropic_wire.encode_request(request, max_tokens=1024, **kwargs)


WIRES: dict[str, tuple[ModuleType, Encode]] = {
    "chat": (chat_wire, chat_wire.encode_request),
    "responses": (responses_wire, responses_wire.encode_request),
    "anthropic": (anthropic_wire, anthropic_encode),
}


def on_wire(requests: Sequence[ModelRequest], wire: str) -> list[ModelRequest]:
    """The requests with the scripted reasoning made ``wire``'s, one new object per message
    (so a message is the same object in every request that carries it, as in the loop's)."""
    seen: dict[int, tuple[Message, Message]] = {}

    def convert(message: Message) -> Message:
        hit = seen.get(id(message))
        if hit is None:
            state = getattr(message, "provider_state", None)
            new = message
            if isinstance(message, AssistantMessage) and state and state.wire == REASONING_WIRE:
                items = tuple(
                    {**item, "signature": "sig", "encrypted_content": "e"} for item in state.items
                )
                new = dataclasses.replace(message, provider_state=ProviderState(wire, items))
            hit = seen[id(message)] = (message, new)
        return hit[1]

    return [
        dataclasses.replace(r, messages=tuple(convert(m) for m in r.messages)) for r in requests
    ]


@pytest.mark.parametrize("wire", sorted(WIRES))
# A small limit (it counts the encoded bytes and the messages an entry holds) still splices.
@pytest.mark.parametrize("limit", [64 * 1024 * 1024, 30_000, 0])
@pytest.mark.parametrize("stream", [False, True])
async def test_spliced_bodies_equal_whole_encodings_over_growing_sessions(
    tmp_path: Path, limit: int, stream: bool, wire: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, encode = WIRES[wire]
    requests = on_wire(await sessions(tmp_path), wire)
    begins: list[int] = []
    whole_items: Callable[[ModelRequest, int], Items] = module.items

    def counted(request: ModelRequest, begin: int) -> Items:
        begins.append(begin)
        return whole_items(request, begin)

    monkeypatch.setattr(module, "items", counted)
    memo = EncodedPrefixes(limit=limit)

    for request in requests:
        spliced = encode(request, model="m", stream=stream, memo=memo)
        assert spliced == encode(request, model="m", stream=stream)

    summarised = [r for r in requests if any(isinstance(m, SummaryMessage) for m in r.messages)]
    assert len(requests) >= 20 and summarised  # the run did reach compaction and tool rounds
    replayed = [r for r in requests if b'"sig"' in encode(r, model="m", stream=False)]
    assert wire == "chat" or replayed  # reasoning went back in a tool round
    spliced_count = sum(b > 0 for b in begins)
    if limit == 0:
        assert spliced_count == 0 and len(memo) == 0  # a cache too small keeps nothing
    else:
        # splices did happen (chat and Responses 10-11 of 20, Anthropic 6-7: it never keeps
        # the last wire message, and a session's first two calls are all last or replayed)
        assert spliced_count >= len(requests) // 4


def grown(request: ModelRequest, *more: Message) -> ModelRequest:
    return ModelRequest(request.instructions, (*request.messages, *more))


def test_a_request_that_does_not_continue_the_kept_one_is_encoded_whole() -> None:
    memo = EncodedPrefixes()
    opening = UserMessage("hello")
    first = ModelRequest("Be brief.", (opening, AssistantMessage("hi")))
    encode_request(first, model="m", stream=False, memo=memo)
    rewritten = ModelRequest("Be brief.", (opening, AssistantMessage("hi there")))
    other_instructions = ModelRequest("Be long.", first.messages)

    for request in (rewritten, other_instructions):
        assert encode_request(request, model="m", stream=False, memo=memo) == encode_request(
            request, model="m", stream=False
        )


def test_a_user_message_after_a_summary_rides_on_it_when_spliced_too() -> None:
    memo = EncodedPrefixes()
    summary = SummaryMessage("they talked about Oslo")
    ending_in_summary = ModelRequest("Be brief.", (UserMessage("hello"), summary))
    encode_request(ending_in_summary, model="m", stream=False, memo=memo)
    after = grown(ending_in_summary, UserMessage("and Turku?"))

    body = encode_request(after, model="m", stream=False, memo=memo)
    assert body == encode_request(after, model="m", stream=False)
    assert b"Oslo\\n\\nand Turku?" in body


def test_at_most_the_limits_are_kept_dropping_the_least_recently_used() -> None:
    memo = EncodedPrefixes(sessions=2)
    requests = [ModelRequest("", (UserMessage(f"session {n}"),)) for n in range(3)]
    for request in (requests[0], requests[1], requests[0], requests[2]):
        encode_request(request, model="m", stream=False, memo=memo)
    assert len(memo) == 2
    assert set(memo._entries) == {id(requests[0].messages[0]), id(requests[2].messages[0])}


def test_extra_keys_that_would_replace_the_frame_are_encoded_whole() -> None:
    memo = EncodedPrefixes()
    request = ModelRequest("Be brief.", (UserMessage("hi"),))
    body = encode_request(request, model="m", stream=False, memo=memo, extra={"model": "other"})
    assert body == encode_request(request, model="m", stream=False, extra={"model": "other"})
    assert body.startswith(b'{"model":"other","messages":')


def thinking(wire: str, text: str | None, *calls: ToolCall) -> AssistantMessage:
    state = ProviderState(wire, ({"type": "thinking", "thinking": "hm", "signature": "sig"},))
    return AssistantMessage(text, calls, provider_state=state)


@pytest.mark.parametrize("wire", ["responses", "anthropic"])
def test_reasoning_of_the_turn_in_flight_is_re_encoded_and_dropped_after_it(wire: str) -> None:
    _, encode = WIRES[wire]
    memo = EncodedPrefixes()
    call = ToolCall("c1", "get_weather", '{"city": "Oslo"}')
    first = ModelRequest("Be brief.", (UserMessage("Oslo?"),))
    in_flight = grown(first, thinking(wire, None, call), ToolResult("c1", "get_weather", "sun"))
    answered = grown(in_flight, AssistantMessage("Sunny."))
    after = grown(answered, UserMessage("Thanks"))

    bodies = [encode(r, model="m", stream=False, memo=memo) for r in (first, in_flight, answered)]
    bodies.append(encode(after, model="m", stream=False, memo=memo))
    assert bodies == [
        encode(r, model="m", stream=False) for r in (first, in_flight, answered, after)
    ]
    assert [b'"sig"' in body for body in bodies] == [False, True, True, False]


def test_anthropic_neighbours_merge_across_an_answer_whose_thinking_is_dropped() -> None:
    memo = EncodedPrefixes()
    opening = ModelRequest("", (UserMessage("a"), AssistantMessage("b"), UserMessage("c")))
    thought = grown(opening, thinking("anthropic", None))  # thinking only: empty once dropped
    after = grown(thought, ToolResult("c1", "t", "r"), UserMessage("d"))

    for request in (opening, thought, after):
        body = anthropic_encode(request, model="m", stream=False, memo=memo)
        assert body == anthropic_encode(request, model="m", stream=False)
    messages = json.loads(body)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["type"] for b in messages[-1]["content"]] == ["text", "tool_result", "text"]


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_the_kept_bytes_are_spliced_not_re_encoded(wire: str) -> None:
    _, encode = WIRES[wire]
    memo = EncodedPrefixes()
    first = ModelRequest(
        "Be brief.", (UserMessage("hello"), AssistantMessage("hi"), UserMessage("more"))
    )
    encode(first, model="m", stream=False, memo=memo)
    second = grown(first, AssistantMessage("sure"), UserMessage("again"))

    # the kept bytes are forged: a body carrying them shows they were spliced, not re-encoded
    key = id(first.messages[0])
    memo._entries[key] = dataclasses.replace(memo._entries[key], encoded=b'"kept"')
    body = encode(second, model="m", stream=False, memo=memo)
    assert b'["kept",' in body
    assert body != encode(second, model="m", stream=False)


def random_message(rng: random.Random, wire: str, n: int) -> Message:
    kind = rng.choice(["user", "user", "summary", "tool", "tool", "answer", "answer", "empty"])
    if kind == "user":
        return UserMessage(f"question {n}")
    if kind == "summary":
        return SummaryMessage(f"summary {n}")
    if kind == "tool":
        return ToolResult(f"c{n}", "t", f"result {n}", is_error=rng.random() < 0.2)
    state_wire = rng.choice([wire, wire, "other"])
    state = ProviderState(state_wire, ({"type": "thinking", "signature": f"sig{n}"},))
    if kind == "empty":  # thinking only: nothing at all once it is no longer replayed
        return AssistantMessage(None, provider_state=state)
    calls = tuple(ToolCall(f"c{n}_{i}", "t", '{"a": 1}') for i in range(rng.randint(0, 2)))
    text = rng.choice([None, f"answer {n}"]) if calls else f"answer {n}"
    return AssistantMessage(text, calls, provider_state=state if rng.random() < 0.6 else None)


@pytest.mark.parametrize("wire", sorted(WIRES))
@pytest.mark.parametrize("seed", range(6))
def test_random_growing_sessions_splice_to_the_whole_bytes(wire: str, seed: int) -> None:
    _, encode = WIRES[wire]
    rng = random.Random(seed)
    memo = EncodedPrefixes(sessions=3)
    sessions: list[list[Message]] = [[UserMessage(f"opening {s}")] for s in range(4)]
    for step in range(240):  # four sessions interleaved, one or two messages a request
        messages = rng.choice(sessions)
        for _ in range(rng.randint(1, 2)):
            messages.append(random_message(rng, wire, step))
        request = ModelRequest("Be brief.", tuple(messages))
        assert encode(request, model="m", stream=False, memo=memo) == encode(
            request, model="m", stream=False
        ), f"step {step}"
