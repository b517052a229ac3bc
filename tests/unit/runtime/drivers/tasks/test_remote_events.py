"""A remote child's own events, relayed into its parent's stream (remote_events.py): each with
an id that does not change when its runtime tells it again, the child's end and other tasks'
events left out, bounded in rate and size (the relay over two real runtimes, across a restart:
tests/integration/test_delegation_across.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from ankka.runtime.drivers.tasks.notify import Notice, Notifier
from ankka.runtime.drivers.tasks.remote_events import (
    MAX_LINE,
    MAX_TEXT,
    Limit,
    relay_events,
    relayed_event,
)
from tests.unit.runtime.drivers.tasks.test_ended_elsewhere import CLOCK, Relay

CHILD = "r1:1.0"


def told(event: str, number: int, task: str = CHILD, **data: Any) -> dict[str, Any]:
    at = f"2026-12-03T20:00:{number:02d}+00:00"
    return {"number": number, "event": event, "agent": "researcher", "instance": "i",
            "task": task, "at": at, **data}  # fmt: skip


def test_the_same_event_told_again_by_another_process_has_the_same_id() -> None:
    first = relayed_event(CHILD, told("iteration_started", 3, iteration=1, budget=5))
    again = relayed_event(CHILD, told("iteration_started", 41, iteration=1, budget=5))
    second = relayed_event(CHILD, told("iteration_started", 4, iteration=2, budget=5))
    assert first is not None and again is not None and second is not None
    assert first[3]["event_id"] == again[3]["event_id"]
    assert first[3]["event_id"] != second[3]["event_id"]
    assert first[3]["event_id"].startswith(f"{CHILD}/iteration_started/")
    assert first[:3] == ("iteration_started", "researcher", "i")


@pytest.mark.parametrize(
    "event",
    [told("task_completed", 1), told("approval_requested", 1), told("not_an_event", 1),
     told("iteration_started", 1, task="r1:1.0:2.0"), {"id": CHILD, "state": "working"}],
)  # fmt: skip
def test_the_childs_end_approvals_unknown_events_and_other_tasks_are_not_relayed(
    event: dict[str, Any],
) -> None:
    assert relayed_event(CHILD, event) is None


def test_a_long_text_is_cut() -> None:
    relayed = relayed_event(CHILD, told("iteration_failed", 1, error="x" * 5000, consecutive=1))
    assert relayed is not None and len(relayed[3]["error"]) == MAX_TEXT + 1


def test_the_limit_lets_a_burst_through_then_its_rate_and_counts_the_rest() -> None:
    now = [0.0]
    limit = Limit(rate=2.0, burst=3.0, clock=lambda: now[0])
    assert [limit.take() for _ in range(5)] == [True, True, True, False, False]
    assert limit.skipped == 2
    now[0] = 1.0  # two more a second
    assert [limit.take() for _ in range(3)] == [True, True, False]


def sse(*items: dict[str, Any] | bytes) -> list[bytes]:
    return [
        i if isinstance(i, bytes) else f"event: x\ndata: {json.dumps(i)}\n\n".encode()
        for i in items
    ]


class Peer:
    """The child's stream at its runtime, one list of chunks per time it is opened; each
    opening after the first comes ``later`` seconds after the one before (on ``now``)."""

    def __init__(self, *streams: list[bytes], later: float = 0.0) -> None:
        self.streams, self.later, self.now, self.opened = list(streams), later, 0.0, 0

    async def open(self, task: str) -> httpx.Response:
        assert task == CHILD
        if not self.streams:
            await asyncio.Event().wait()  # nothing more: open until cancelled
        self.now += self.later if self.opened else 0.0
        self.opened += 1
        chunks = self.streams.pop(0)

        async def body() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield chunk

        return httpx.Response(200, content=body())


async def no_pause(_: int) -> None:
    await asyncio.sleep(0)


async def handed_on(relaying: Callable[[Notifier], Awaitable[object]]) -> list[Notice]:
    """What a relay (``relaying``, run to its end) handed on to the stream of ``r1``, the
    child's parent."""
    notifier = Notifier(CLOCK)
    notifier.nest(CHILD, ("r1",))
    got: list[Notice] = []
    with notifier.subscribe(("task", "r1")) as parent:
        await asyncio.wait_for(relaying(notifier), 5)
        while parent._buffer:  # what was handed on, no more to come
            item = await parent.next()
            assert isinstance(item, Notice)
            got.append(item)
    return got


async def relay(peer: Peer, limit: Limit | None = None) -> list[Notice]:
    ended = asyncio.Event()
    got = await handed_on(
        lambda notifier: relay_events(
            notifier, CHILD, "researcher", peer.open, limit=limit, pause=no_pause, ended=ended
        )
    )
    assert ended.is_set()
    return got


async def test_events_told_again_after_the_peers_stream_broke_are_relayed_once() -> None:
    started = told("iteration_started", 1, iteration=1, budget=5)
    peer = Peer(
        sse({"id": CHILD, "state": "working"}, told("task_started", 1), started),
        # The stream opened again (the peer restarted): the same iteration started again.
        sse({"id": CHILD}, dict(started, number=7), told("iteration_completed", 8, iteration=1),
            told("task_completed", 9)),
    )  # fmt: skip
    got = await relay(peer)
    assert [(n.event, n.task, n.agent, n.data.get("iteration")) for n in got] == [
        ("task_started", CHILD, "researcher", None),
        ("iteration_started", CHILD, "researcher", 1),
        ("iteration_completed", CHILD, "researcher", 1),
    ]
    assert {n.data["remote"] for n in got} == {"researcher"}
    assert len({n.data["event_id"] for n in got}) == 3


async def test_a_chatty_child_is_cut_to_the_limit_and_the_next_event_says_how_many() -> None:
    failing = [told("iteration_failed", i, error="e", consecutive=i) for i in range(1, 8)]
    peer = Peer(sse(*failing[:5]), sse(*failing[5:], told("task_failed", 9)), later=10.0)
    limit = Limit(rate=1.0, burst=2.0, clock=lambda: peer.now)
    got = await relay(peer, limit)
    assert [n.data["consecutive"] for n in got] == [1, 2, 6, 7]
    assert [n.data.get("skipped") for n in got] == [None, None, 3, None]


async def test_a_line_longer_than_the_bound_is_skipped_whole() -> None:
    long = b"data: " + b"x" * (MAX_LINE + 10)
    peer = Peer([long[: MAX_LINE // 2], long[MAX_LINE // 2 :] + b"\n\n",
                 *sse(told("task_started", 2), told("task_cancelled", 3))])  # fmt: skip
    got = await relay(peer)
    assert [n.event for n in got] == ["task_started"]


async def test_two_processes_relaying_the_same_event_tell_each_subscriber_of_it_once() -> None:
    """Every process on a shared store follows the child and relays what it reads; each also
    hears the other's through the store's relay."""
    relay = Relay()
    here, there = Notifier(CLOCK, relay=relay), Notifier(CLOCK, relay=relay)
    fields: dict[str, Any] = {
        "iteration": 1,
        "budget": 5,
        "remote": "researcher",
        "event_id": f"{CHILD}/x/1",
    }
    with here.subscribe(("task", CHILD)) as subscription, there.subscribe(("task", CHILD)):
        there.relay("iteration_started", agent="researcher", instance="i", task=CHILD, **fields)
        await asyncio.sleep(0)  # the relay delivers on the loop
        told = here.relay(
            "iteration_started", agent="researcher", instance="i", task=CHILD, **fields
        )
        again: dict[str, Any] = {**fields, "event_id": f"{CHILD}/x/2"}
        here.relay("iteration_started", agent="researcher", instance="i", task=CHILD, **again)
        await asyncio.sleep(0)
        got = [await subscription.next() for _ in range(2)]
    assert told is None
    assert [n.data["event_id"] for n in got if isinstance(n, Notice)] == [
        f"{CHILD}/x/1",
        f"{CHILD}/x/2",
    ]
    assert not subscription._buffer  # nothing more: neither was told twice
