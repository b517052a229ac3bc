"""Live notifications: ordered, bounded per subscriber, never slowing the instance."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from ankka._kernel.clock import SystemClock
from ankka.runtime.drivers.tasks.notify import Dropped, Notice, Notifier
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.tasks import InstanceState, TaskState
from examples.tasks import service as example
from tests.unit.runtime.conftest import MakeHost, finished, put
from tests.unit.runtime.drivers.tasks.test_iteration import GOOD, LOOKUP, Gate, complete


class FixedClock(SystemClock):
    def now(self) -> datetime:
        return datetime(2026, 12, 1, tzinfo=UTC)


async def test_a_slow_reader_loses_the_oldest_and_is_told_how_many() -> None:
    notifier = Notifier(FixedClock())
    with notifier.subscribe(("task", "t"), capacity=3) as subscription:
        for number in range(5):
            notifier.publish("iteration_started", agent="a", instance="i", task="t", n=number)
        first = await subscription.next()
        assert first == Dropped(2)
        rest = [await subscription.next() for _ in range(3)]
    assert [n.data["n"] for n in rest if isinstance(n, Notice)] == [2, 3, 4]


async def test_a_subscriber_sees_an_instance_s_events_in_order(make_host: MakeHost) -> None:
    host = await make_host(example, ScriptedProvider([LOOKUP, complete(GOOD)], name="default"))
    with host.notifier.subscribe(("instance", "researcher", "i")) as subscription:
        await put(host, "t1", instance="i")
        await finished(host, "t1")
        events = []
        while True:
            item = await subscription.next()
            assert isinstance(item, Notice)
            events.append(item.event)
            if item.event == "passivated":
                break
    assert events == [
        "task_assigned",
        "activated",
        "task_started",
        "iteration_started",
        "iteration_completed",
        "iteration_started",
        "iteration_completed",
        "task_completed",
        "passivated",
    ]


async def test_a_subscriber_that_never_reads_loses_events_and_slows_nothing(
    make_host: MakeHost,
) -> None:
    script = [LOOKUP] * 8 + [complete(GOOD)]
    host = await make_host(example, ScriptedProvider(script, name="default"))
    with host.notifier.subscribe(("task", "t1"), capacity=4) as never_read:
        await put(host, "t1", instance="i")
        record = await host.wait("t1", 10.0)
        assert record.state == TaskState.FAILED  # the budget of 5 ran out, on time
        assert isinstance(await never_read.next(), Dropped)


async def test_terminating_an_instance_puts_its_task_back_pending_unassigned(
    make_host: MakeHost,
) -> None:
    gate = Gate([complete(GOOD)])
    host = await make_host(example, gate)
    await put(host, "t1", instance="i")
    await asyncio.wait_for(gate.arrived.wait(), 5)  # in the middle of an iteration
    view = await host.set_instance("researcher", "i", InstanceState.TERMINATED)
    assert view.record.state == InstanceState.TERMINATED
    record = await host.get("t1")
    assert record.state == TaskState.PENDING and record.instance is None
    assert not host._workers


async def test_what_is_kept_per_task_is_forgotten_at_its_end() -> None:
    """A long-lived process keeps nothing for a task once its end was told: neither what was
    told once (``once``) nor its ancestors (a leak of one entry per task, before)."""
    notifier = Notifier(FixedClock())
    for task in ("ended", "live"):
        notifier.nest(task, ["parent"])
        assert notifier.once(task, "task_waiting")
        assert not notifier.once(task, "task_waiting")
    with notifier.subscribe(("task", "parent"), capacity=8) as parent:
        notifier.publish("task_completed", agent="a", instance="i", task="ended")
        told = await parent.next()  # its end still reached the ancestor's stream
        assert isinstance(told, Notice) and told.task == "ended"
    assert "ended" not in notifier._above
    assert notifier.once("ended", "task_waiting")  # forgotten: nothing kept for it
    assert not notifier.once("live", "task_waiting")  # a live task's are kept
    assert notifier._above["live"] == ("parent",)
