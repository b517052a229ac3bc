"""Delegation end to end on one task host (a real SQLite file, the scripted provider): the
lead of examples/team.py delegates two summaries, waits, and writes its report."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ankka._kernel.errors import NotFound
from ankka.runtime.declare.agents import Service
from ankka.runtime.drivers.tasks.host import TaskHost
from ankka.runtime.drivers.tasks.notify import Notice
from ankka.runtime.providers.base import ModelRequest, ModelResponse
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.messages import AssistantMessage, ToolResult
from ankka.runtime.records.tasks import TaskRecord, TaskSpec, TaskState
from ankka.runtime.store.open import Store
from ankka.runtime.tasks import Accepts, AutonomousAgent, Delegate, Handoff, Limits, TaskType
from examples.tasks import Summary, lookup, summary
from examples.team import report, service
from tests.support.eventually import eventually_async
from tests.support.runtimes import make_context, task_host_for
from tests.unit.runtime.conftest import NO_PAUSE, MakeHost, finished, put

SCRIPT = json.loads(Path("examples/team-standin.json").read_text())
CHILDREN = ("r1:1.0", "r1:1.1")


async def results(host: TaskHost, task: str) -> list[dict[str, Any]]:
    """The delegation calls' results in ``task``'s session, decoded (less a budget note the
    newest message may carry after the JSON)."""
    messages = await host.bench.context.journal.conversation(f"task:{task}")
    return [
        json.JSONDecoder().raw_decode(str(m.content))[0]
        for m in messages
        if isinstance(m, ToolResult) and m.name.startswith("delegate__")
    ]


async def test_the_lead_delegates_two_summaries_and_reports_on_both(make_host: MakeHost) -> None:
    provider = ScriptedProvider(SCRIPT, name="default")
    host = await make_host(service, provider)
    await put(host, "r1", "Report on sqlite and postgresql.", agent="lead", kind="report")
    record = await finished(host, "r1")
    assert record.state == TaskState.COMPLETED, record.reason
    assert record.result == SCRIPT[-1]["tool_calls"][0]["arguments"]
    assert record.tree is not None and record.tree.children == ("r1:1.0", "r1:1.1")
    children = [await host.get(child) for child in record.tree.children]
    assert [c.state for c in children] == [TaskState.COMPLETED] * 2
    assert {c.tree.parent for c in children if c.tree} == {"r1"}
    told = await results(host, "r1")
    assert [(t["status"], t["task"], t["agent"]) for t in told] == [
        ("completed", "r1:1.0", "researcher"),
        ("completed", "r1:1.1", "researcher"),
    ]
    assert sorted(t["result"]["title"] for t in told) == ["postgresql", "sqlite"]
    # The tree's usage is the sum of its tasks' own, each counted once.
    own = record.usage + children[0].usage + children[1].usage
    assert record.tree.tree_usage == own
    assert record.tree.tree_iterations == 2 + 2 + 2
    assert len(provider.requests) == 6


def tools(
    *calls: tuple[str, dict[str, Any]], when: str | None = None, call: int | None = None
) -> dict[str, Any]:
    turn: dict[str, Any] = {"tool_calls": [{"name": n, "arguments": a} for n, a in calls]}
    if when is not None:
        turn["when"] = when
    if call is not None:
        turn["call"] = call
    return turn


def delegate(instructions: str, tool: str = "delegate__researcher__summary") -> tuple[str, Any]:
    return (tool, {"instructions": instructions})


async def test_a_parents_stream_carries_its_childrens_events_and_ends_with_its_own_end(
    make_host: MakeHost,
) -> None:
    host = await make_host(service, ScriptedProvider(SCRIPT, name="default"))
    seen: list[tuple[str | None, str, str]] = []
    with host.notifier.subscribe(("task", "r1")) as subscription:
        await put(host, "r1", "Report on sqlite and postgresql.", agent="lead", kind="report")
        while not seen or seen[-1][:2] != ("r1", "task_completed"):
            item = await subscription.next()
            assert isinstance(item, Notice)
            seen.append((item.task, item.event, item.agent))
    for child in CHILDREN:
        mine = [(event, agent) for task, event, agent in seen if task == child]
        assert ("task_assigned", "researcher") in mine
        assert [e for e, _ in mine].count("iteration_completed") == 2
        assert mine[-1] == ("task_completed", "researcher")
    delegated = [e for t, e, _ in seen if t == "r1" and e == "task_delegated"]
    assert len(delegated) == 2


class HeldFirstCall(ScriptedProvider):
    """The scripted model, holding its first call (the lead's delegating answer) until let go."""

    def __init__(self, script: Any) -> None:
        super().__init__(script, name="default")
        self.asked, self.go = asyncio.Event(), asyncio.Event()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if not self.asked.is_set():
            self.asked.set()
            await self.go.wait()
        return await super().complete(request)


async def test_an_answers_children_start_at_once_without_the_scheduler_looking_for_work(
    make_host: MakeHost,
) -> None:
    # The scheduler is stopped while the lead's delegating answer is asked for: its children
    # are made and started by the host that made them, not found by a scheduler's look.
    provider = HeldFirstCall(SCRIPT)
    host = await make_host(service, provider, poll_seconds=3600.0)
    await put(host, "r1", "Report on sqlite and postgresql.", agent="lead", kind="report")
    await asyncio.wait_for(provider.asked.wait(), 10)
    host._scheduler.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await host._scheduler
    provider.go.set()

    async def ended(child: str) -> TaskRecord | None:
        with contextlib.suppress(NotFound):
            record = await host.get(child)
            return record if record.final else None
        return None  # not made yet

    for child in CHILDREN:
        record = await eventually_async(lambda c=child: ended(c), what=f"{child} ended")  # type: ignore[misc]
        assert record.state == TaskState.COMPLETED, record.reason
    assert len(provider.requests) == 1 + 2 * len(CHILDREN)  # the lead waits (no scheduler)


async def test_a_failed_child_reaches_its_parent_as_a_failure_never_an_empty_success(
    make_host: MakeHost,
) -> None:
    script = [
        tools(delegate("Summarise nothing.")),
        tools(("fail_task", {"reason": "nothing known about nothing"}), when="user"),
        tools(("fail_task", {"reason": "the summary failed"}), when="tool"),
    ]
    host = await make_host(service, ScriptedProvider(script, name="default"))
    await put(host, "r1", agent="lead", kind="report")
    record = await finished(host, "r1")
    assert record.state == TaskState.FAILED and record.reason == "the summary failed"
    [told] = await results(host, "r1")
    assert told == {
        "status": "failed",
        "task": "r1:1.0",
        "agent": "researcher",
        "reason": "nothing known about nothing",
    }
    messages = await host.bench.context.journal.conversation("task:r1")
    [result] = [m for m in messages if isinstance(m, ToolResult) and m.name.startswith("del")]
    assert result.is_error


async def test_a_delegation_back_up_the_chain_is_refused_naming_the_chain(
    make_host: MakeHost,
) -> None:
    kind = TaskType("x", description="Anything.", result=Summary)
    made = Service("cycle")
    made.autonomous(
        AutonomousAgent(
            name="b", accepts=[Accepts(kind, budget=5)], delegates=[Delegate("a", kind)]
        )
    )
    made.autonomous(
        AutonomousAgent(
            name="a", accepts=[Accepts(kind, budget=5)], delegates=[Delegate("b", kind)]
        )
    )
    back = tools(delegate("Back to a.", "delegate__a__x"), when="user")
    script = [
        tools(delegate("Go to b.", "delegate__b__x"), when="user"),
        back,
        tools(("fail_task", {"reason": "refused"}), when="tool"),
        tools(("fail_task", {"reason": "b failed"}), when="tool"),
    ]
    provider = ScriptedProvider(script, name="default")
    host = await make_host(made, provider)
    await put(host, "t", agent="a", kind="x")
    assert (await finished(host, "t")).state == TaskState.FAILED
    [refused] = await results(host, "t:1.0")
    assert refused["status"] == "refused" and refused["error"] == "delegation_cycle"
    assert refused["chain"] == ["a", "b", "a"]
    assert "a → b → a" in refused["reason"]
    assert (await host.get("t")).tree.children == ("t:1.0",)  # type: ignore[union-attr]
    assert len(provider.requests) == 4  # the refused call made no task, no model call


async def test_a_child_deeper_than_the_limit_is_refused(make_host: MakeHost) -> None:
    kind = TaskType("x", description="Anything.", result=Summary)
    made = Service("deep")
    made.autonomous(AutonomousAgent(name="c", tools=[lookup], accepts=[Accepts(kind, budget=5)]))
    made.autonomous(
        AutonomousAgent(
            name="b",
            accepts=[Accepts(kind, budget=5)],
            delegates=[Delegate("c", kind)],
            limits=Limits(max_depth=1),
        )
    )
    made.autonomous(
        AutonomousAgent(
            name="a", accepts=[Accepts(kind, budget=5)], delegates=[Delegate("b", kind)]
        )
    )
    script = [
        tools(delegate("Go to b.", "delegate__b__x"), when="user"),
        tools(delegate("Go to c.", "delegate__c__x"), when="user"),
        tools(("fail_task", {"reason": "too deep"}), when="tool"),
        tools(("fail_task", {"reason": "b failed"}), when="tool"),
    ]
    host = await make_host(made, ScriptedProvider(script, name="default"))
    await put(host, "t", agent="a", kind="x")
    await finished(host, "t")
    [refused] = await results(host, "t:1.0")
    assert refused["status"] == "refused" and refused["error"] == "depth_exceeded"
    assert refused["chain"] == ["a", "b", "c"]


SAME = ("lookup", {"topic": "sqlite"})


@pytest.mark.parametrize(
    ("script", "asked"),
    [
        ([tools(SAME)] * 4, 3),  # one call an answer: the third answer's is not run
        # The adversarial case: 100 identical calls in one answer (two run).
        ([tools(*[SAME] * 100)] * 2, 1),
    ],
    ids=["one-an-answer", "a-hundred-in-one-answer"],
)
async def test_the_third_identical_call_ends_the_task_before_it_runs(
    make_host: MakeHost, script: list[dict[str, Any]], asked: int
) -> None:
    provider = ScriptedProvider(script, name="default")
    host = await make_host(service, provider)
    await put(host, "s1", agent="researcher", kind="summary")
    record = await finished(host, "s1")
    assert record.state == TaskState.FAILED
    assert record.tree is not None and record.tree.end == "repeated_call"
    assert record.reason is not None and "'lookup' was asked for 3 times" in record.reason
    assert len(provider.requests) == asked  # no model call after it
    assert record.iterations_used == asked
    messages = await host.bench.context.journal.conversation("task:s1")
    ran = [m for m in messages if isinstance(m, ToolResult) and m.name == "lookup"]
    assert len(ran) == 2, ran  # the third never ran, nor any after it


async def test_a_child_is_given_only_what_remains_and_the_tree_stops_at_its_budget(
    make_host: MakeHost,
) -> None:
    kind = TaskType("x", description="Anything.", result=Summary)
    made = Service("budget")
    made.autonomous(AutonomousAgent(name="b", tools=[lookup], accepts=[Accepts(kind, budget=5)]))
    made.autonomous(
        AutonomousAgent(
            name="a", accepts=[Accepts(kind, budget=3)], delegates=[Delegate("b", kind)]
        )
    )
    script = [
        tools(delegate("Go to b.", "delegate__b__x"), when="user"),
        tools(("lookup", {"topic": "sqlite"}), when="user"),
        tools(("lookup", {"topic": "postgresql"}), when="tool"),
        tools(("lookup", {"topic": "ankka"}), when="tool"),  # never asked: b has 2
    ]
    provider = ScriptedProvider(script, name="default")
    host = await make_host(made, provider)
    await put(host, "t", agent="a", kind="x")
    record = await finished(host, "t")
    child = await host.get("t:1.0")
    assert child.budget == 2 and child.iterations_used == 2
    assert child.tree is not None and child.tree.end == "budget_exhausted"
    [told] = await results(host, "t")
    assert told["status"] == "budget_exhausted"
    assert record.state == TaskState.FAILED
    assert record.tree is not None and record.tree.end == "budget_exhausted"
    assert record.tree.tree_iterations == 3
    assert len(provider.requests) == 3  # the lead made no call past the tree's budget


async def test_cancelling_a_parent_cancels_its_children(make_host: MakeHost) -> None:
    slow = tools(("lookup", {"topic": "sqlite"}), when="user")
    slow["delay_ms"] = 60_000
    script = [tools(delegate("Summarise sqlite.")), slow]
    provider = ScriptedProvider(script, name="default")
    host = await make_host(service, provider)
    await put(host, "r1", agent="lead", kind="report")
    await eventually_async(
        lambda: _asked(provider, 2), what="the child's model call in flight", timeout=10
    )
    await host.cancel("r1")
    record = await finished(host, "r1")
    child = await finished(host, "r1:1.0")
    assert record.state == TaskState.CANCELLED
    assert child.state == TaskState.CANCELLED
    assert child.reason is not None and "its parent 'r1' ended" in child.reason


async def _asked(provider: ScriptedProvider, count: int) -> bool:
    return len(provider.requests) >= count


def handoff_service() -> Service:
    """``a`` (budget 4 for type ``x``) may hand its task to ``b`` (budget 9)."""
    kind = TaskType("x", description="Anything.", result=Summary)
    made = Service("handoff")
    made.autonomous(AutonomousAgent(name="b", tools=[lookup], accepts=[Accepts(kind, budget=9)]))
    made.autonomous(
        AutonomousAgent(
            name="a", tools=[lookup], accepts=[Accepts(kind, budget=4)], handoffs=[Handoff("b")]
        )
    )
    return made


async def test_a_handoff_moves_the_task_with_its_history_and_what_is_left_of_its_budget(
    make_host: MakeHost,
) -> None:
    made = handoff_service()
    good = {"title": "sqlite", "points": ["one file"]}
    script = [
        tools(("lookup", {"topic": "sqlite"}), when="user"),
        tools(("handoff__b", {"note": "b knows databases"}), when="tool", call=2),
        tools(("complete_task", good), when="tool", call=3),
    ]
    provider = ScriptedProvider(script, name="default")
    host = await make_host(made, provider)
    await put(host, "t", agent="a", kind="x")
    record = await finished(host, "t")
    assert record.state == TaskState.COMPLETED and record.result == good
    assert record.spec.agent == "b" and record.instance == "task.t"
    assert record.budget == 4 and record.iterations_used == 3  # a's budget, carried on
    assert record.tree is not None
    [moved] = record.tree.handoffs
    assert (moved["from"], moved["to"], moved["note"]) == ("a", "b", "b knows databases")
    messages = await host.bench.context.journal.conversation("task:t")
    answers = [m.agent for m in messages if isinstance(m, AssistantMessage)]
    assert answers == ["a", "a", "b"]  # b was shown everything a did
    assert len(provider.requests[2].messages) == len(provider.requests[1].messages) + 2
    # The creator's body, sent again to the first agent, is still the same task.
    again, created = await host.put(
        "a", "t", TaskSpec("a", "x", "Summarise ankka."), instance=None, created_by="local"
    )
    assert again.id == "t" and not created


async def test_after_a_handoff_the_first_agents_instance_moves_on_to_its_next_task(
    make_host: MakeHost,
) -> None:
    """Two tasks queued on one instance of ``a``: the first is handed to ``b`` and moves to an
    instance of its own; ``a``'s instance goes on to the second and works it itself."""
    made = handoff_service()
    first = {"title": "sqlite", "points": ["one file"]}
    second = {"title": "postgresql", "points": ["a server"]}
    script = [
        {**tools(("handoff__b", {"note": "b knows sqlite"})), "contains": "Task t1 (type"},
        {**tools(("complete_task", first), when="tool"), "contains": "Task t1 (type"},
        {**tools(("complete_task", second)), "contains": "Task t2 (type"},
    ]
    provider = ScriptedProvider(script, name="default")
    host = await make_host(made, provider)
    await put(host, "t1", agent="a", kind="x", instance="desk")
    await put(host, "t2", agent="a", kind="x", instance="desk")
    handed, kept = await finished(host, "t1"), await finished(host, "t2")
    assert handed.state == TaskState.COMPLETED and handed.result == first
    assert handed.spec.agent == "b" and handed.instance == "task.t1"
    assert handed.tree is not None and [(h["from"], h["to"]) for h in handed.tree.handoffs] == [
        ("a", "b")
    ]
    assert kept.state == TaskState.COMPLETED and kept.result == second
    assert kept.spec.agent == "a" and kept.instance == "desk"
    assert kept.tree is None or not kept.tree.handoffs
    messages = await host.bench.context.journal.conversation("task:t2")
    assert [m.agent for m in messages if isinstance(m, AssistantMessage)] == ["a"]


async def test_a_silent_child_ends_at_its_deadline_and_its_parent_is_told(
    make_host: MakeHost,
) -> None:
    made = Service("deadline")
    made.autonomous(
        AutonomousAgent(name="researcher", tools=[lookup], accepts=[Accepts(summary, budget=5)])
    )
    made.autonomous(
        AutonomousAgent(
            name="lead",
            accepts=[Accepts(report, budget=5)],
            delegates=[Delegate("researcher", summary, deadline=0.5)],
        )
    )
    silent = tools(("lookup", {"topic": "sqlite"}), when="user")
    silent["delay_ms"] = 60_000
    script = [
        tools(delegate("Summarise sqlite."), when="user"),
        silent,
        tools(("fail_task", {"reason": "the researcher was silent"}), when="tool"),
    ]
    host = await make_host(made, ScriptedProvider(script, name="default"))
    await put(host, "r1", agent="lead", kind="report")
    record = await finished(host, "r1")
    child = await host.get("r1:1.0")
    assert child.state == TaskState.FAILED
    assert child.tree is not None and child.tree.end == "deadline_exceeded"
    [told] = await results(host, "r1")
    assert told["status"] == "deadline_exceeded" and "0.5 s" in told["reason"]
    assert record.reason == "the researcher was silent"


async def test_a_token_budget_covers_the_tree_and_a_child_gets_only_what_is_left(
    make_host: MakeHost,
) -> None:
    made = Service("tokens")
    made.autonomous(
        AutonomousAgent(name="researcher", tools=[lookup], accepts=[Accepts(summary, budget=5)])
    )
    made.autonomous(
        AutonomousAgent(
            name="lead",
            accepts=[Accepts(report, budget=8, tokens=1000)],
            delegates=[Delegate("researcher", summary)],
        )
    )
    spend = {"input_tokens": 300, "output_tokens": 0}
    first = tools(delegate("Summarise sqlite."), when="user")
    first["usage"] = spend
    looked = tools(("lookup", {"topic": "sqlite"}), when="user")
    looked["usage"] = spend
    again = tools(("lookup", {"topic": "postgresql"}), when="tool")
    again["usage"] = {"input_tokens": 500, "output_tokens": 0}
    script = [first, looked, again, tools(("lookup", {"topic": "ankka"}), when="tool")]
    provider = ScriptedProvider(script, name="default")
    host = await make_host(made, provider)
    await put(host, "r1", agent="lead", kind="report")
    record = await finished(host, "r1")
    child = await host.get("r1:1.0")
    assert child.tree is not None and child.tree.token_budget == 700  # 1000 less the lead's 300
    assert child.tree.end == "budget_exhausted"  # 800 spent: one call past its grant, no more
    [told] = await results(host, "r1")
    assert told["status"] == "budget_exhausted"
    assert record.tree is not None and record.tree.end == "budget_exhausted"
    assert record.tree.tree_usage.input_tokens == 1100
    assert len(provider.requests) == 3  # nothing asked once the tree's tokens were spent


async def test_the_team_tree_on_postgresql(postgres_server: str) -> None:
    database = f"tree_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(postgres_server, autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {database}")
    dsn = postgres_server.rsplit("/", 1)[0] + f"/{database}"
    provider = ScriptedProvider(SCRIPT, name="default")
    async with AsyncExitStack() as stack:
        store = await Store.open(dsn)
        stack.push_async_callback(store.close)
        context = make_context(service, store=store.journal_store, providers={"default": provider})
        await stack.enter_async_context(context)
        host = task_host_for(context, store.tasks, retry=NO_PAUSE, poll_seconds=0.05)
        await stack.enter_async_context(host)
        await put(host, "r1", "Report on sqlite and postgresql.", agent="lead", kind="report")
        record = await finished(host, "r1")
        assert record.state == TaskState.COMPLETED, record.reason
        assert record.tree is not None and record.tree.children == ("r1:1.0", "r1:1.1")
        told = await results(host, "r1")
        assert sorted(t["task"] for t in told if t["status"] == "completed") == [
            "r1:1.0",
            "r1:1.1",
        ]
        children = [await host.get(child) for child in record.tree.children]
        assert record.tree.tree_usage == record.usage + children[0].usage + children[1].usage
        assert len(provider.requests) == 6


async def test_fifty_children_asking_for_the_last_tokens_get_them_one_grant_at_a_time(
    make_host: MakeHost,
) -> None:
    made = Service("race")
    made.autonomous(
        AutonomousAgent(name="researcher", tools=[lookup], accepts=[Accepts(summary, budget=5)])
    )
    made.autonomous(
        AutonomousAgent(
            name="lead",
            accepts=[Accepts(report, budget=100, tokens=1000)],
            delegates=[Delegate("researcher", summary, budget=1, tokens=100)],
            limits=Limits(max_children=50),
        )
    )
    fifty = tools(*(delegate(f"Summarise topic {n}.") for n in range(50)), when="user")
    fifty["usage"] = {"input_tokens": 100, "output_tokens": 0}
    done = tools(("complete_task", {"title": "t", "points": ["p"]}), when="user", call=1)
    done["usage"] = {"input_tokens": 30, "output_tokens": 0}
    last = tools(("fail_task", {"reason": "enough"}), when="tool")
    provider = ScriptedProvider([fifty, *[done] * 50, last], name="default")
    host = await make_host(made, provider)
    await put(host, "r1", agent="lead", kind="report")
    record = await finished(host, "r1")
    told = await results(host, "r1")
    made_children = [t for t in told if t["status"] == "completed"]
    refused = [t for t in told if t["status"] == "refused"]
    # 900 tokens left, 100 reserved for each child; a child that ended gives back the 70 it did
    # not spend, so more than 9 may be made (as many as ended meanwhile), never more than fit.
    count = len(made_children)
    assert 9 <= count < 50 and len(refused) == 50 - count
    assert {t["error"] for t in refused} == {"budget_exhausted"}
    assert record.tree is not None and len(record.tree.children) == count
    spent = record.tree.tree_usage.input_tokens + record.tree.tree_usage.output_tokens
    assert spent == 100 + count * 30
    # No grant is more than what was left, and a child spends at most one call past its
    # grant: a child given the last few tokens spends its one call (30) in full. So the tree
    # spends at most its budget plus, per child given less than a call, what the call took
    # past it (with children ending meanwhile and giving back, there can be several).
    grants = [(await host.get(child)).tree for child in record.tree.children]
    over = sum(max(0, 30 - (g.token_budget or 0)) for g in grants if g is not None)
    assert spent <= 1000 + over
    if record.tree.end == "budget_exhausted":  # the lead is told nothing is left: no call
        assert spent >= 1000 and len(provider.requests) == 1 + count
    else:
        assert record.reason == "enough" and len(provider.requests) == 1 + count + 1


async def test_the_parent_is_told_where_it_stands_counting_what_its_children_used(
    make_host: MakeHost,
) -> None:
    made = Service("note")
    made.autonomous(
        AutonomousAgent(name="researcher", tools=[lookup], accepts=[Accepts(summary, budget=5)])
    )
    made.autonomous(
        AutonomousAgent(
            name="lead",
            accepts=[Accepts(report, budget=5)],
            delegates=[Delegate("researcher", summary, budget=2)],
        )
    )
    script = [
        tools(delegate("Summarise sqlite."), when="user"),
        tools(("lookup", {"topic": "sqlite"}), when="user"),
        tools(("complete_task", {"title": "sqlite", "points": ["one file"]}), when="tool"),
        tools(("fail_task", {"reason": "enough"}), when="tool"),
    ]
    provider = ScriptedProvider(script, name="default")
    host = await make_host(made, provider)
    await put(host, "r1", agent="lead", kind="report")
    await finished(host, "r1")
    # The lead's second call: its own first, and its child's two, are spent.
    newest = str(provider.requests[-1].messages[-1].content)
    assert "This is iteration 4 of 5: 2 iterations remain" in newest
