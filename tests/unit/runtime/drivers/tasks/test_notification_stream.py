"""A task's notification stream ends after the task's final event, and ends too when that
event never reached this process (the relay between processes is live, not durable): hearing
nothing, it reads the task's record and tells the end it finds there."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from ankka._kernel.clock import ManualClock
from ankka.runtime.drivers.tasks.notify import Notice, Notifier
from ankka.runtime.serve.tasks_http import event_stream

CLOCK = ManualClock(datetime(2026, 12, 1, 8, 0, tzinfo=UTC))


def _events_of(chunks: list[bytes]) -> list[str]:
    return [
        line.removeprefix("event: ")
        for chunk in chunks
        for line in chunk.decode().splitlines()
        if line.startswith("event: ")
    ]


async def test_a_task_stream_ends_after_the_final_event() -> None:
    notifier = Notifier(CLOCK)
    subscription = notifier.add(("task", "t1"))
    notifier.publish("task_started", agent="a", instance="i", task="t1")
    notifier.publish("task_completed", agent="a", instance="i", task="t1", reason=None)
    notifier.publish("iteration_started", agent="a", instance="i", task="t1")  # after: unsent

    async def still_running() -> Notice | None:
        return None

    chunks = [
        c
        async for c in event_stream(
            subscription, b"event: snapshot\n\n", ended=still_running, seconds=30
        )
    ]
    assert _events_of(chunks) == ["snapshot", "task_started", "task_completed"]


async def test_a_task_stream_that_missed_the_end_reads_it_from_the_record() -> None:
    notifier = Notifier(CLOCK)
    subscription = notifier.add(("task", "t1"))
    reads: list[int] = []

    async def from_the_record() -> Notice | None:
        reads.append(1)
        if len(reads) < 3:
            return None  # still running, twice
        return notifier.notice("task_failed", agent="a", instance="i", task="t1", reason="no")

    chunks = [
        c
        async for c in event_stream(
            subscription, b"event: snapshot\n\n", ended=from_the_record, seconds=30, recheck=0.01
        )
    ]
    assert _events_of(chunks) == ["snapshot", "task_failed"]
    data = json.loads(chunks[-1].decode().split("data: ", 1)[1])
    assert data["task"] == "t1" and data["reason"] == "no" and len(reads) == 3


async def test_an_instance_stream_does_not_end_with_a_task() -> None:
    notifier = Notifier(CLOCK)
    subscription = notifier.add(("instance", "a", "i"))
    notifier.publish("task_completed", agent="a", instance="i", task="t1", reason=None)
    chunks = [c async for c in event_stream(subscription, b"", ended=None, seconds=0.2)]
    assert _events_of(chunks) == ["task_completed"]  # then on, until ``seconds`` ran out
