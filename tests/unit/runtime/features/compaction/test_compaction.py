"""Compaction end to end on the scripted provider: one provider for the agent and a separate
one for the summariser (a shared script races: whichever asks first takes the other's turn).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ankka._kernel.errors import ConfigurationError, ModelUnavailable
from ankka.runtime.compaction import Compaction
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.declare.tools import tool
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.providers import chat_wire
from ankka.runtime.providers.base import ModelProvider, ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.compaction import COMPACTED, REJECTED
from ankka.runtime.records.messages import (
    AssistantMessage,
    SummaryMessage,
    ToolResult,
    Usage,
    UserMessage,
)
from tests.support.runtimes import runtime_for
from tests.support.stores import journal_store

ANSWER = "a" * 50
SETTINGS = Compaction(limit_chars=400, keep_messages=2)  # queued past 300 characters


@tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def question(n: int) -> str:
    return f"question {chr(97 + n % 26)} ".ljust(50, "q")


class Clock:
    def __init__(self) -> None:
        self.at = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)

    def now(self) -> datetime:
        return self.at

    def monotonic(self) -> float:
        return self.at.timestamp()


def chat_service(settings: Compaction = SETTINGS) -> Service:
    service = Service("test")

    @service.agent("chat")
    def chat(request: TurnRequest) -> Turn:
        return Turn(
            message=request.message,
            instructions="Chat.",
            tools=[get_weather],
            compaction=settings,
        )

    return service


Make = Callable[..., Any]


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Make]:
    made: list[Runtime] = []

    async def build(
        agent: Sequence[Any],
        summaries: Sequence[Any] | ModelProvider,
        *,
        service: Service | None = None,
        workers: int = 4,
        clock: Clock | None = None,
    ) -> tuple[Runtime, ScriptedProvider, Any]:
        store = await journal_store(tmp_path / "journal.sqlite3")
        provider = ScriptedProvider(agent, name="default")
        summariser = (
            summaries
            if isinstance(summaries, ModelProvider)
            else ScriptedProvider(summaries, name="default")
        )
        runtime = runtime_for(
            service or chat_service(),
            store=store,
            providers={"default": provider},
            compaction_providers={"default": summariser},
            compaction_workers=workers,
            clock=clock,
        )
        await runtime.__aenter__()
        made.append(runtime)
        return runtime, provider, summariser

    yield build
    for runtime in made:
        await runtime.aclose()


async def turns(runtime: Runtime, session: str, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        await runtime.run(runtime.plan("chat", session, question(n)))
        await runtime.context.compactor.idle()


async def kinds(runtime: Runtime, session: str) -> list[str]:
    return [e.kind for e in await runtime.context.journal.store.read(session)]


async def test_crossing_the_limit_queues_one_summary_and_keeps_the_whole_history(
    make: Make,
) -> None:
    runtime, provider, summariser = await make([ANSWER] * 5, ["They asked a to d."])
    await turns(runtime, "s", 3)
    assert summariser.requests == []  # 300 characters: not past the start yet
    await turns(runtime, "s", 1, start=3)
    assert len(summariser.requests) == 1
    assert (await kinds(runtime, "s")).count(COMPACTED) == 1
    sent = await runtime.messages("s", as_sent=True)
    assert isinstance(sent[0], SummaryMessage) and sent[0].content == "They asked a to d."
    assert [type(m) for m in sent[1:]] == [UserMessage, AssistantMessage]
    assert len(await runtime.messages("s")) == 8  # nothing said is lost
    await runtime.run(runtime.plan("chat", "s", question(4)))
    assert provider.requests[-1].messages[0] == sent[0]
    summary = await runtime.summary("s")
    assert summary.compactions == 1 and summary.turns == 5
    metrics = runtime.metrics.render().decode()
    assert "ankka_compactions_total 1.0" in metrics
    assert 'ankka_compaction_chars_total{when="before"} 400.0' in metrics
    assert 'ankka_compaction_chars_total{when="after"} 118.0' in metrics


async def test_compacting_twice_folds_the_earlier_summary_in_and_never_stacks(
    make: Make,
) -> None:
    runtime, _, summariser = await make([ANSWER] * 7, ["first summary", "second summary"])
    await turns(runtime, "s", 7)  # past the start after the 4th turn, and again after the 6th
    assert len(summariser.requests) == 2
    second = summariser.requests[1].messages[0]
    assert isinstance(second, UserMessage)
    assert second.content.startswith("The earlier summary:\nfirst summary")
    sent = await runtime.messages("s", as_sent=True)
    assert [m.content for m in sent if isinstance(m, SummaryMessage)] == ["second summary"]
    assert len(await runtime.messages("s")) == 14


async def test_the_cut_never_separates_a_tool_call_from_its_result(make: Make) -> None:
    call = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}
    script: list[Any] = [ANSWER, ANSWER, ANSWER, call, "Sunny in Oslo, as the tool says." * 2]
    settings = Compaction(limit_chars=400, keep_messages=3)
    runtime, _, summariser = await make(
        script, ["They chatted; Oslo was asked about."], service=chat_service(settings)
    )
    await turns(runtime, "s", 4)
    assert len(summariser.requests) == 1
    sent = await runtime.messages("s", as_sent=True)
    # keeping 3 would start on the tool call's answer: the cut moved back to the question
    assert isinstance(sent[0], SummaryMessage) and isinstance(sent[1], UserMessage)
    results = [m for m in sent if isinstance(m, ToolResult)]
    calls = {c.id for m in sent if isinstance(m, AssistantMessage) for c in m.tool_calls}
    assert results and all(r.call_id in calls for r in results)


@pytest.mark.parametrize(
    ("summary", "reason"), [("", "empty"), ("x" * 2000, "longer_than_replaced")]
)
async def test_a_summary_that_fails_a_check_is_rejected_and_the_history_kept(
    make: Make, summary: str, reason: str
) -> None:
    clock = Clock()
    runtime, _, summariser = await make([ANSWER] * 6, [summary, "good summary"], clock=clock)
    await turns(runtime, "s", 4)
    assert (await kinds(runtime, "s")).count(REJECTED) == 1
    assert not any(isinstance(m, SummaryMessage) for m in await runtime.messages("s", as_sent=True))
    stored = [e for e in await runtime.context.journal.store.read("s") if e.kind == REJECTED]
    assert f'"reason":"{reason}"' in stored[0].body
    assert f'reason="{reason}"' in runtime.metrics.render().decode()
    assert (await runtime.summary("s")).compaction_rejections == 1
    await turns(runtime, "s", 1, start=4)
    assert len(summariser.requests) == 1  # pausing after the rejection
    clock.at += timedelta(seconds=31)
    await turns(runtime, "s", 1, start=5)
    assert len(summariser.requests) == 2
    assert isinstance((await runtime.messages("s", as_sent=True))[0], SummaryMessage)


class FlakySummariser:
    """Fails its first call as an unreachable model would, then answers from a script."""

    def __init__(self, script: Sequence[str]) -> None:
        self.inner = ScriptedProvider(script, name="default")
        self.calls = 0

    name = "default"
    model = "scripted"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.calls == 1:
            raise ModelUnavailable("default", "connection refused")
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        yield await self.complete(request)

    async def aclose(self) -> None:
        return None


async def test_a_failed_summariser_call_is_skipped_and_other_sessions_are_still_compacted(
    make: Make,
) -> None:
    flaky = FlakySummariser(["the b session"])
    runtime, _, _ = await make([ANSWER] * 8, flaky, workers=1)
    await turns(runtime, "a", 4)
    await turns(runtime, "b", 4)
    assert flaky.calls == 2
    assert not any(isinstance(m, SummaryMessage) for m in await runtime.messages("a", as_sent=True))
    sent_b = await runtime.messages("b", as_sent=True)
    assert isinstance(sent_b[0], SummaryMessage) and sent_b[0].content == "the b session"
    assert 'ankka_compaction_failures_total{kind="model_unavailable"} 1.0' in (
        runtime.metrics.render().decode()
    )


async def test_the_summariser_is_sent_no_tools_and_its_usage_is_the_sessions_compaction_usage(
    make: Make,
) -> None:
    summary = {
        "text": "They asked four questions.",
        "usage": {"input_tokens": 90, "output_tokens": 9},
    }
    runtime, provider, summariser = await make([ANSWER] * 4, [summary])
    await turns(runtime, "s", 4)
    assert provider.requests[0].tools  # the agent has its tool
    request = summariser.requests[0]
    assert request.tools == () and request.output is None
    assert [type(m) for m in request.messages] == [UserMessage]
    totals = await runtime.summary("s")
    assert totals.compaction_usage.input_tokens == 90
    assert totals.usage.input_tokens == 0  # turns' usage apart
    assert 'ankka_compaction_tokens_total{kind="input"} 90.0' in runtime.metrics.render().decode()


def wire_messages(request: ModelRequest) -> list[bytes]:
    body = json.loads(chat_wire.encode_request(request, model="m", stream=False))
    return [json.dumps(m, ensure_ascii=False).encode() for m in body["messages"]]


async def test_the_request_prefix_is_identical_until_a_compaction_changes_it(make: Make) -> None:
    runtime, provider, _ = await make([ANSWER] * 5, ["summary"])
    await turns(runtime, "s", 5)
    requests = provider.requests
    for before, after in itertools.pairwise(requests[:4]):
        assert after.instructions == before.instructions and after.tools == before.tools
        assert list(after.messages[: len(before.messages)]) == list(before.messages)
        # and byte for byte on the wire: the earlier request's messages open the later one's
        sent_before, sent_after = wire_messages(before), wire_messages(after)
        assert sent_after[: len(sent_before)] == sent_before
    # the compaction after the 4th turn is the one point where the prefix changes
    assert isinstance(requests[4].messages[0], SummaryMessage)
    assert requests[4].messages[0] != requests[3].messages[0]


async def test_a_summariser_model_that_is_not_configured_is_named_before_the_turn_runs(
    make: Make,
) -> None:
    settings = Compaction(limit_chars=400, model="small")
    runtime, provider, _ = await make([ANSWER], [], service=chat_service(settings))
    with pytest.raises(ConfigurationError, match="is summarised by model 'small'"):
        await runtime.run(runtime.plan("chat", "s", question(0)))
    assert provider.requests == []


class GatedSummariser:
    """Holds every call until its gate opens, counting the calls in flight."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.in_flight = 0
        self.most_at_once = 0
        self.asked: list[str] = []

    name = "default"
    model = "scripted"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        message = request.messages[0]
        assert isinstance(message, UserMessage)
        self.asked.append(message.content)
        self.in_flight += 1
        self.most_at_once = max(self.most_at_once, self.in_flight)
        await self.gate.wait()
        self.in_flight -= 1
        return ModelResponse("they chatted", (), Usage(), "scripted")

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        yield await self.complete(request)

    async def aclose(self) -> None:
        return None


async def test_one_compaction_per_session_at_a_time_and_at_most_the_bound_at_once(
    make: Make,
) -> None:
    gated = GatedSummariser()
    runtime, _, _ = await make([ANSWER] * 16, gated, workers=2)
    for name in ("a", "b", "c"):
        for n in range(4):
            await runtime.run(runtime.plan("chat", name, question(n)))
    for _ in range(20):
        await asyncio.sleep(0)
    assert gated.in_flight == 2  # the third session waits for a worker
    await runtime.run(
        runtime.plan("chat", "a", question(5))
    )  # a's compaction is in flight: not a second
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(gated.asked) == 2
    gated.gate.set()
    await runtime.context.compactor.idle()
    assert gated.most_at_once == 2
    for name in ("a", "b", "c"):
        sent = await runtime.messages(name, as_sent=True)
        assert isinstance(sent[0], SummaryMessage)
