"""Spliced Chat Completions bodies are byte-identical to whole encodings.

A real runtime on SQLite, answered by the scripted provider, runs sessions the way they grow:
many turns, tool rounds, a compaction, a turn suspended for approval and resumed, a typed
answer, a restart (every message read back as a new object) and a memo too small to keep
everything. Every request the loop made is then encoded twice, in the order it was made: once
spliced (one :class:`EncodedPrefixes` across all of them, as a provider keeps it) and once
whole.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pydantic
import pytest

from ankka._kernel.clock import ManualClock
from ankka.runtime.agents import Service, Turn, TurnRequest
from ankka.runtime.approvals.index import ApprovalIndex
from ankka.runtime.compaction import Compaction
from ankka.runtime.host import Runtime
from ankka.runtime.journal.sqlite import SqliteStore
from ankka.runtime.messages import AssistantMessage, Message, SummaryMessage, UserMessage
from ankka.runtime.providers.base import ModelRequest
from ankka.runtime.providers.chat_wire import EncodedPrefixes, encode_request
from ankka.runtime.tasks.sqlite_store import SqliteTaskStore
from ankka.runtime.testing import ScriptedProvider
from ankka.runtime.tools import tool

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
    return {"tool_calls": [{"name": "get_weather", "arguments": {"city": c}} for c in cities]}


def refund_call(order: str, amount: float) -> dict[str, Any]:
    return {"tool_calls": [{"name": "refund", "arguments": {"order": order, "amount": amount}}]}


async def runtime_on(path: Path, script: Sequence[dict[str, Any] | str]) -> Runtime:
    provider = ScriptedProvider(script, name="default")
    summary = "So far: weather in Oslo Turku Pori Vaasa; refund A1 250 250.0; 0 1 2 3 4 5 6 7."
    summariser = ScriptedProvider([summary] * 4, name="default")
    runtime = Runtime(
        service(),
        store=await SqliteStore.open(path),
        providers={"default": provider},
        compaction_providers={"default": summariser},
        clock=ManualClock(datetime(2026, 12, 1, 8, 0, tzinfo=UTC)),
        approvals=ApprovalIndex(await SqliteTaskStore.open(path)),
        approval_tick_seconds=3600,
    )
    await runtime.__aenter__()
    return runtime


async def close(runtime: Runtime) -> list[ModelRequest]:
    provider = runtime.providers["default"]
    assert isinstance(provider, ScriptedProvider) and provider.remaining == 0
    await runtime.aclose()
    assert runtime.approvals.index is not None
    await runtime.approvals.index.store.close()
    return list(provider.requests)


async def chat(runtime: Runtime, session: str, message: str) -> None:
    await runtime.run(runtime.plan("chat", session, message))
    await runtime.compactor.idle()


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


@pytest.mark.parametrize("limit", [64 * 1024 * 1024, 3000])
@pytest.mark.parametrize("stream", [False, True])
async def test_spliced_bodies_equal_whole_encodings_over_growing_sessions(
    tmp_path: Path, limit: int, stream: bool
) -> None:
    requests = await sessions(tmp_path)
    memo = EncodedPrefixes(limit=limit)

    for request in requests:
        spliced = encode_request(request, model="m", stream=stream, memo=memo)
        assert spliced == encode_request(request, model="m", stream=stream)

    summarised = [r for r in requests if any(isinstance(m, SummaryMessage) for m in r.messages)]
    assert len(requests) >= 20 and summarised  # the run did reach compaction and tool rounds


def grown(request: ModelRequest, *more: Message) -> ModelRequest:
    return ModelRequest(request.instructions, (*request.messages, *more))


def test_a_growing_session_encodes_only_its_new_messages() -> None:
    memo = EncodedPrefixes()
    first = ModelRequest("Be brief.", (UserMessage("hello"),))
    encode_request(first, model="m", stream=False, memo=memo)
    answer = AssistantMessage("hi")
    second = grown(first, answer, UserMessage("again"))

    # the kept bytes are spliced, not re-encoded: a message whose encoding would now differ
    # (it cannot, messages are frozen; here the kept bytes are forged) shows which is used
    memo._entries[id(first.messages[0])] = dataclasses.replace(
        memo._entries[id(first.messages[0])], encoded=b'"kept"'
    )
    body = encode_request(second, model="m", stream=False, memo=memo)
    assert body.startswith(b'{"model":"m","messages":["kept",{"role":"assistant"')


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
