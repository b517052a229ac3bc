"""Approvals in a task, on a real SQLite file with the scripted provider: the task waits in
awaiting-approval making no model call, its notifications, and a refusal told to the model."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ankka.runtime.declare.agents import Service
from ankka.runtime.declare.tools import Tool, tool
from ankka.runtime.drivers.tasks.iteration import RetryPolicy
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.messages import ToolResult
from ankka.runtime.records.tasks import TaskSpec, TaskState
from ankka.runtime.store.open import Store
from ankka.runtime.tasks import Accepts, AutonomousAgent
from examples.tasks import summary
from tests.support.eventually import eventually_async
from tests.support.runtimes import runtime_for, task_host_for

RAN: list[str] = []


@tool(requires_approval=lambda args: args.topic != "harmless")
def publish(topic: str) -> str:
    """Publish a topic."""
    RAN.append(topic)
    return f"{topic} published"


def publish_call(topic: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "publish", "arguments": {"topic": topic}}]}


COMPLETE = {
    "tool_calls": [{"name": "complete_task", "arguments": {"title": "ankka", "points": ["told"]}}]
}


def researcher(tool: Tool) -> Service:
    """The service of an agent ``researcher`` with ``tool``, accepting summaries."""
    service = Service("tasks")
    service.autonomous(
        AutonomousAgent(
            name="researcher",
            instructions="Publish, then complete.",
            tools=[tool],
            accepts=[Accepts(summary, budget=5)],
        )
    )
    return service


async def test_a_task_waits_makes_no_model_call_and_is_told_of_a_refusal(
    tmp_path: Path,
) -> None:
    RAN.clear()
    service = researcher(publish)
    path = tmp_path / "store.sqlite3"
    provider = ScriptedProvider(
        [publish_call("harmless"), publish_call("secret"), COMPLETE], name="default"
    )
    store = await Store.open(path)
    index = store.approvals
    runtime = runtime_for(
        service,
        store=store.journal_store,
        providers={"default": provider},
        approvals=index,
    )
    host = task_host_for(
        runtime.context,
        store.tasks,
        poll_seconds=0.05,
        retry=RetryPolicy(first_pause=0.0, max_pause=0.0),
    )
    runtime.approvals.task_decided = host.approval_decided
    async with runtime, host:
        with host.notifier.subscribe(("task", "t1")) as events:
            await host.put(
                "researcher",
                "t1",
                TaskSpec("researcher", "summary", "Publish ankka."),
                instance=None,
                created_by="local",
            )

            async def waiting() -> bool:
                record = await host.get("t1")
                return record.state == TaskState.AWAITING_APPROVAL and not host._workers

            await eventually_async(waiting, what="t1 to await approval, its instance idle")
            assert RAN == ["harmless"]  # the small one ran; the gated one waits
            # Its instance idles (no worker left to call the model until a decision): the
            # model was asked twice, the answer that called the gated tool the last.
            assert len(provider.requests) == 2
            assert index is not None
            (row,) = await index.find(session="task:t1", state="pending")
            (shown,) = await runtime.approvals.shown([row])
            decided = await runtime.approvals.decide(
                row.id, "refused", shown["digest"], reason="not public", decided_by="ann"
            )
            assert decided.status == "resumed"
            record = await host.wait("t1", 10.0)
            assert record.state == TaskState.COMPLETED, record
            seen: list[str | None] = []
            while "task_completed" not in seen:  # the stream's last event; told, not timed
                assert len(seen) < 100, seen
                notice = await asyncio.wait_for(events.next(), 10)
                seen.append(getattr(notice, "event", None))
        results = [
            m
            for m in await runtime.context.journal.conversation("task:t1")
            if isinstance(m, ToolResult)
        ]
    await store.close()
    assert RAN == ["harmless"]
    assert "approval_requested" in seen and "approval_decided" in seen
    refused = next(r for r in results if r.name == "publish" and r.is_error)
    assert "a person refused" in refused.content and "not public" in refused.content
