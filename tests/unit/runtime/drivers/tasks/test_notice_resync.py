"""After the relay between processes comes back from a break (notices sent meanwhile never
arrived), everyone who depends on other processes' notices reads again from the store: each
subscription is told :class:`Resynced` once, the notifier's ``resynced`` hook runs, a stream
sends its snapshot again, and a task's stream whose task ended meanwhile ends with the end its
record shows (the PostgreSQL relay's real break: tests/integration/test_mcp_asking_pods.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ankka.runtime.drivers.tasks.notify import Notice, Notifier, Resynced
from ankka.runtime.serve.tasks_http import event_stream
from tests.unit.runtime.drivers.tasks.test_ended_elsewhere import CLOCK, Relay
from tests.unit.runtime.drivers.tasks.test_notification_stream import _events_of


async def test_each_subscription_and_the_hook_are_told_once_after_the_relay_came_back() -> None:
    relay = Relay()
    told: list[str] = []
    notifier = Notifier(CLOCK, relay=relay, resynced=lambda: told.append("resynced"))
    task, instance = notifier.add(("task", "t1")), notifier.add(("instance", "a", "i"))
    relay.came_back()
    relay.came_back()  # two breaks before a read: one resync
    notifier.publish("task_started", agent="a", instance="i", task="t1")
    assert told == ["resynced", "resynced"]
    for subscription in (task, instance):
        assert isinstance(await subscription.next(), Resynced)
        after = await subscription.next()
        assert isinstance(after, Notice) and after.event == "task_started"


async def _stream(notifier: Notifier, *, ended: bool) -> list[bytes]:
    subscription = notifier.add(("task", "t1"))
    snapshots: list[int] = []

    async def again() -> bytes:
        snapshots.append(1)
        return b"event: snapshot\n\n"

    async def from_the_record() -> Notice | None:
        if not ended:
            return None
        return notifier.notice("task_cancelled", agent="a", instance="i", task="t1")

    stream: AsyncIterator[bytes] = event_stream(
        subscription, b"event: snapshot\n\n", ended=from_the_record, seconds=0.5, again=again
    )
    chunks = [await anext(stream)]
    subscription.resync()
    chunks += [c async for c in stream]
    return chunks


async def test_a_stream_sends_its_snapshot_again_after_the_relay_came_back() -> None:
    chunks = await _stream(Notifier(CLOCK), ended=False)
    assert _events_of(chunks) == ["snapshot", "snapshot"]


async def test_a_task_stream_whose_task_ended_meanwhile_ends_with_the_records_end() -> None:
    chunks = await _stream(Notifier(CLOCK), ended=True)
    assert _events_of(chunks) == ["snapshot", "task_cancelled"]
