"""The spans of what happens beside a turn's steps, recorded by OpenTelemetry's SDK in memory:
an approval's wait (from the suspension to the decision, with the decision) and a compaction
(its summariser's ``chat`` inside, under the turn that queued it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ankka._kernel.clock import ManualClock
from ankka.runtime.declare.tools import tool
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.engine.spans import EngineSpans
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.tasks import TaskSpec, TaskState
from ankka.runtime.store.open import Store
from tests.support.eventually import eventually_async
from tests.support.runtimes import runtime_for, task_host_for
from tests.support.stores import journal_store
from tests.unit.runtime.drivers.tasks.test_approvals import COMPLETE, publish_call, researcher
from tests.unit.runtime.drivers.test_approvals import refund_call
from tests.unit.runtime.drivers.test_approvals import service as refunds
from tests.unit.runtime.engine.test_spans import _named, recorded
from tests.unit.runtime.features.compaction.test_compaction import ANSWER, chat_service, question

__all__ = ["recorded"]  # the engine spans' fixture, used here

START = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


async def _refunds(tmp_path: Path, spans: EngineSpans, clock: ManualClock, reply: str) -> Runtime:
    """The refunds service on a journal in ``tmp_path``: its model asks for a refund of 250
    (which waits for a decision, at most 60 s), then answers ``reply``."""
    store = await journal_store(tmp_path / "j.sqlite3")
    script: list[dict[str, Any] | str] = [{"tool_calls": [refund_call("A1", 250)]}, reply]
    return runtime_for(
        refunds(),
        store=store,
        providers={"default": ScriptedProvider(script, name="default", clock=clock)},
        clock=clock,
        approvals=store.store.approvals,
        approval_tick_seconds=3600,
        spans=spans,
    )


def _child_of_the_asking(wait: ReadableSpan, ended: tuple[ReadableSpan, ...]) -> ReadableSpan:
    """The invoke_agent that suspended (the first to end), asserting ``wait`` is its child."""
    asked = _named(ended, "invoke_agent")[0]
    assert (asked.attributes or {})["ankka.turn.outcome"] == "awaiting_approval"
    assert wait.parent is not None and wait.parent.span_id == asked.context.span_id
    assert wait.context.trace_id == asked.context.trace_id
    return asked


async def test_an_approvals_wait_is_a_span_from_suspension_to_decision(
    tmp_path: Path, recorded: tuple[EngineSpans, InMemorySpanExporter]
) -> None:
    spans, exporter = recorded
    clock = ManualClock(START)
    runtime = await _refunds(tmp_path, spans, clock, "Refunded.")
    async with runtime:
        result = await runtime.run(runtime.plan("refunds", "s", "refund"))
        (request,) = result.awaiting
        assert _named(exporter.get_finished_spans(), "ankka.approval") == []
        clock.advance(42)
        await runtime.approvals.decide(request.id, "approved", request.digest, decided_by="ann")

    ended = exporter.get_finished_spans()
    (wait,) = _named(ended, "ankka.approval")
    assert wait.name == "ankka.approval refund"
    attributes = wait.attributes or {}
    assert attributes["ankka.approval.id"] == request.id
    assert attributes["ankka.approval.decision"] == "approved"
    assert attributes["gen_ai.tool.name"] == "refund"
    assert attributes["gen_ai.tool.call.id"] == request.call_id
    assert wait.start_time == int(START.timestamp() * 1e9)
    assert wait.end_time == int((START + timedelta(seconds=42)).timestamp() * 1e9)
    assert "ann" not in repr(dict(attributes))  # who decided is the journal's, not the span's
    # The approved call then ran, in the resumed turn.
    (run,) = _named(ended, "execute_tool refund")
    assert (run.attributes or {})["ankka.approval.id"] == request.id
    # Nothing was current as it was decided here (no request's span): the turn that asked,
    # its first invoke_agent, is its parent.
    _child_of_the_asking(wait, ended)


async def test_an_expired_approvals_wait_joins_the_trace_of_the_turn_that_asked(
    tmp_path: Path, recorded: tuple[EngineSpans, InMemorySpanExporter]
) -> None:
    spans, exporter = recorded
    runtime = await _refunds(tmp_path, spans, clock := ManualClock(START), "Expired.")
    async with runtime:
        with spans.tracer.start_as_current_span("POST turn"):  # as the turn's SERVER span is
            result = await runtime.run(runtime.plan("refunds", "s", "refund"))
        (request,) = result.awaiting
        clock.advance(61)  # the refund's approval_timeout is 60 s
        assert await runtime.approvals.expire_due() == 1

    ended = exporter.get_finished_spans()
    (wait,) = _named(ended, "ankka.approval")
    assert (wait.attributes or {})["ankka.approval.decision"] == "expired"
    assert (wait.attributes or {})["ankka.approval.id"] == request.id
    turns = _named(ended, "invoke_agent")
    outcomes = [(s.attributes or {})["ankka.turn.outcome"] for s in turns]
    assert outcomes == ["awaiting_approval", "finished"]  # the resumed turn, told it expired
    assert _child_of_the_asking(wait, ended) == turns[0]
    assert wait.links == ()


@tool(requires_approval=True, approval_timeout=60)
def publish(topic: str) -> str:
    """Publish a topic."""
    return f"{topic} published"


async def test_a_tasks_expired_wait_joins_the_trace_of_the_iteration_that_asked(
    tmp_path: Path, recorded: tuple[EngineSpans, InMemorySpanExporter]
) -> None:
    spans, exporter = recorded
    service = researcher(publish)
    clock = ManualClock(START)
    provider = ScriptedProvider([publish_call("ankka"), COMPLETE], name="default", clock=clock)
    store = await Store.open(tmp_path / "store.sqlite3")
    runtime = runtime_for(
        service,
        store=store.journal_store,
        providers={"default": provider},
        clock=clock,
        approvals=store.approvals,
        approval_tick_seconds=3600,
        spans=spans,
    )
    host = task_host_for(runtime.context, store.tasks, poll_seconds=0.05)
    runtime.approvals.task_decided = host.approval_decided
    async with runtime, host:
        spec = TaskSpec("researcher", "summary", "Publish ankka.")
        await host.put("researcher", "t1", spec, instance=None, created_by="local")

        async def waiting() -> bool:
            return (await host.get("t1")).state == TaskState.AWAITING_APPROVAL

        await eventually_async(waiting, what="t1 to await approval")
        clock.advance(61)  # the tool's approval_timeout is 60 s
        assert await runtime.approvals.expire_due() == 1
        assert (await host.wait("t1", 10.0)).state == TaskState.COMPLETED
    await store.close()

    ended = exporter.get_finished_spans()
    (wait,) = _named(ended, "ankka.approval")
    assert (wait.attributes or {})["ankka.approval.decision"] == "expired"
    asked = _child_of_the_asking(wait, ended)  # the first iteration's invoke_agent
    assert (asked.attributes or {})["ankka.task.id"] == "t1"


async def test_a_wait_decided_in_a_request_is_its_child_linked_to_the_turn_that_asked(
    tmp_path: Path, recorded: tuple[EngineSpans, InMemorySpanExporter]
) -> None:
    spans, exporter = recorded
    runtime = await _refunds(tmp_path, spans, ManualClock(START), "Not refunded.")
    async with runtime:
        result = await runtime.run(runtime.plan("refunds", "s", "refund"))
        (request,) = result.awaiting
        with spans.tracer.start_as_current_span("POST /v1/approvals/{id}"):
            await runtime.approvals.decide(request.id, "refused", request.digest, decided_by="b")

    ended = exporter.get_finished_spans()
    (wait,) = _named(ended, "ankka.approval")
    (deciding,) = _named(ended, "POST /v1/approvals")
    asked = _named(ended, "invoke_agent")[0]
    assert wait.parent is not None and wait.parent.span_id == deciding.context.span_id
    assert [link.context.span_id for link in wait.links] == [asked.context.span_id]
    assert [link.context.trace_id for link in wait.links] == [asked.context.trace_id]


async def test_a_compaction_is_a_span_with_its_summarisers_chat_inside(
    tmp_path: Path, recorded: tuple[EngineSpans, InMemorySpanExporter]
) -> None:
    spans, exporter = recorded
    store = await journal_store(tmp_path / "j.sqlite3")
    summary = {"text": "They asked a to d.", "usage": {"input_tokens": 80, "output_tokens": 9}}
    summariser = ScriptedProvider([summary], name="default")
    runtime = runtime_for(
        chat_service(),
        store=store,
        providers={"default": ScriptedProvider([ANSWER] * 4, name="default")},
        compaction_providers={"default": summariser},
        spans=spans,
    )
    async with runtime:
        for n in range(4):
            with spans.tracer.start_as_current_span(f"request {n}"):  # as a SERVER span is
                await runtime.run(runtime.plan("chat", "s", question(n)))
            await runtime.context.compactor.idle()

    ended = exporter.get_finished_spans()
    (compaction,) = _named(ended, "ankka.compaction")
    attributes = compaction.attributes or {}
    assert attributes["ankka.compaction.outcome"] == "compacted"
    assert attributes["gen_ai.conversation.id"] == "s"
    assert attributes["gen_ai.usage.input_tokens"] == 80
    replaced, after = (
        attributes["ankka.compaction.replaced_chars"],
        attributes["ankka.compaction.chars_after"],
    )
    assert isinstance(replaced, int) and isinstance(after, int) and replaced > after
    assert "They asked" not in repr(dict(attributes))
    chats = [
        s for s in ended if s.parent is not None and s.parent.span_id == compaction.context.span_id
    ]
    assert [s.name for s in chats] == ["chat scripted"]
    # Its parent is the request whose turn's commit queued it, the fourth, in its trace.
    (fourth,) = _named(ended, "request 3")
    assert compaction.parent is not None
    assert compaction.parent.span_id == fourth.context.span_id
    assert compaction.context.trace_id == fourth.context.trace_id
