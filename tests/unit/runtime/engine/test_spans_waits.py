"""The spans of what happens beside a turn's steps, recorded by OpenTelemetry's SDK in memory:
an approval's wait (from the suspension to the decision, with the decision) and a compaction
(its summariser's ``chat`` inside, under the turn that queued it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ankka._kernel.clock import ManualClock
from ankka.runtime.engine.spans import EngineSpans
from ankka.runtime.providers.scripted import ScriptedProvider
from tests.support.runtimes import runtime_for
from tests.support.stores import journal_store
from tests.unit.runtime.drivers.test_approvals import refund_call
from tests.unit.runtime.drivers.test_approvals import service as refunds
from tests.unit.runtime.engine.test_spans import _named, recorded
from tests.unit.runtime.features.compaction.test_compaction import ANSWER, chat_service, question

__all__ = ["recorded"]  # the engine spans' fixture, used here

START = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


async def test_an_approvals_wait_is_a_span_from_suspension_to_decision(
    tmp_path: Path, recorded: tuple[EngineSpans, InMemorySpanExporter]
) -> None:
    spans, exporter = recorded
    store = await journal_store(tmp_path / "j.sqlite3")
    clock = ManualClock(START)
    script: list[dict[str, Any] | str] = [{"tool_calls": [refund_call("A1", 250)]}, "Refunded."]
    provider = ScriptedProvider(script, name="default", clock=clock)
    runtime = runtime_for(
        refunds(),
        store=store,
        providers={"default": provider},
        clock=clock,
        approvals=store.store.approvals,
        approval_tick_seconds=3600,
        spans=spans,
    )
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
