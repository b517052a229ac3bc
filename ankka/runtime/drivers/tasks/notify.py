"""Live notifications of what instances and tasks do, for subscribers (SSE).

Notifications are live, not durable: a subscriber sees what happens from the moment it
subscribes (the durable account is the task's record). Each subscriber has a bounded buffer;
publishing never waits for a reader: when the buffer is full the oldest notification is
dropped and counted, and the reader is told how many (:class:`Dropped`) before the rest.
So a subscriber that never reads costs its buffer and nothing else.

With several processes on one store (PostgreSQL), an instance runs in one of them, and its
subscribers may be connected to any: every notification is also sent through the store's
relay (:class:`~ankka.runtime.store.database.NoticeRelay`, LISTEN/NOTIFY), and each process
hands the ones other processes sent to its own subscribers, numbered in its own sequence.
A task's end another process told is also handed to ``ended_elsewhere`` (the task host's: it
closes the questions the task's call waits on here, which the process that ended it does not
hold), so a process that may hold such a question listens from its start (:meth:`listen`).

The relay is live, not durable: what is sent while this process's listening connection is
down never arrives. When it hears again, the relay says so (its ``resync``), and this
notifier resynchronises everyone who depends on other processes' notices from the store:
each subscription gets :class:`Resynced` (a waiter reads its task's record again, a stream
sends its ``snapshot`` again, or the end its record shows), and ``resynced`` is called (the
task host re-reads whether the tasks of the questions waiting here ended). In the normal path
nothing more is read than before: only a break costs these reads.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ankka._kernel.clock import Clock
from ankka.runtime.store.database import NoticeRelay

__all__ = [
    "APPROVALS",
    "APPROVAL_EVENTS",
    "DEFAULT_BUFFER",
    "TASK_ENDS",
    "Dropped",
    "Notice",
    "Notifier",
    "Resynced",
    "Subscription",
]

log = logging.getLogger("ankka.tasks")

DEFAULT_BUFFER = 256
_REMEMBERED_RELAYS = 4096

# PostgreSQL refuses a NOTIFY payload of 8,000 bytes or more; a notice's own text (a reason, an
# error) is cut to this many characters when the whole would not fit.
_RELAYED_BYTES = 7_000
_CUT_TEXT = 500

# What is published (``Notice.event``).
EVENTS = (
    "activated",
    "passivated",
    "iteration_started",
    "iteration_completed",
    "iteration_failed",
    "task_assigned",
    "task_started",
    "task_completed",
    "task_failed",
    "task_cancelled",
    "task_result_rejected",
    "task_waiting",
    "task_delegated",
    "task_handed_off",
    "task_artifact",  # only a remote A2A child's, relayed (remote_a2a_events.py)
    "budget_approaching",
    "model_calls_failing",
    "dependency_pending_long",
    "approval_requested",
    "approval_decided",
    "approval_expiring",
)


APPROVAL_EVENTS = frozenset({"approval_requested", "approval_decided", "approval_expiring"})
TASK_ENDS = frozenset({"task_completed", "task_failed", "task_cancelled"})
# The key of ``GET /v1/approvals/notifications``: every approval event, of request agents'
# sessions and of tasks, whoever's (the route keeps those the caller may read).
APPROVALS = ("approvals",)


@dataclass(frozen=True, slots=True)
class Notice:
    number: int
    event: str
    agent: str
    instance: str | None
    task: str | None
    at: datetime
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "event": self.event,
            "agent": self.agent,
            "instance": self.instance,
            "task": self.task,
            "at": self.at.isoformat(),
            **self.data,
        }


@dataclass(frozen=True, slots=True)
class Dropped:
    count: int


@dataclass(frozen=True, slots=True)
class Resynced:
    """Notices from other processes may have been missed (the relay's connection broke and
    came back): what the subscriber shows of them is read again from the store."""


RESYNCED = Resynced()


class Subscription:
    def __init__(self, capacity: int) -> None:
        self._buffer: deque[Notice] = deque()
        self._capacity = capacity
        self._dropped = 0
        self._resync = False
        self._ready = asyncio.Event()

    def offer(self, notice: Notice) -> None:
        if len(self._buffer) >= self._capacity:
            self._buffer.popleft()
            self._dropped += 1
        self._buffer.append(notice)
        self._ready.set()

    def resync(self) -> None:
        """Notices may have been missed: the next read is :class:`Resynced` (once, however
        many breaks came before it)."""
        self._resync = True
        self._ready.set()

    async def next(self) -> Notice | Dropped | Resynced:
        """The next notification, waiting for one; a :class:`Dropped` first if some were
        lost since the last read, and :class:`Resynced` before the rest once notices from
        other processes may have been missed (what was buffered came before or after the
        break, and is told after it)."""
        while not self._buffer and not self._dropped and not self._resync:
            self._ready.clear()
            await self._ready.wait()
        if self._dropped:
            count, self._dropped = self._dropped, 0
            return Dropped(count)
        if self._resync:
            self._resync = False
            return RESYNCED
        return self._buffer.popleft()


class Notifier:
    def __init__(
        self,
        clock: Clock,
        *,
        buffer: int = DEFAULT_BUFFER,
        relay: NoticeRelay | None = None,
        heard: Callable[[str, str, Mapping[str, Any]], None] | None = None,
        ended_elsewhere: Callable[[Notice], None] | None = None,
        resynced: Callable[[], None] | None = None,
    ) -> None:
        """``heard(event, agent, data)`` is told of every notice published here (the
        metrics), never of one relayed from another process; ``ended_elsewhere(notice)`` of
        every task end relayed from another process, never of one published here;
        ``resynced()`` each time the relay may have missed some (what ``ended_elsewhere``
        would have been told is then read from the store)."""
        self._clock = clock
        self._heard = heard
        self._ended_elsewhere = ended_elsewhere
        self._resynced = resynced
        self.buffer = buffer
        self._numbers = itertools.count(1)
        self._subscribers: dict[tuple[str, ...], set[Subscription]] = {}
        # What was told once per task (``once``), forgotten with the task's end, as _above is.
        self._once: dict[str, set[str]] = {}
        # A delegated task's ancestors (nearest last): its events are theirs too, until it ends.
        self._above: dict[str, tuple[str, ...]] = {}
        self._relay = relay
        self._origin = uuid.uuid4().hex  # this process's notices come back; they are skipped
        self._listening = False
        self._relays: set[str] = set()  # remote children's event ids told here (relay())
        self._relay_order: deque[str] = deque()

    def publish(
        self,
        event: str,
        *,
        agent: str,
        instance: str | None,
        task: str | None = None,
        **data: Any,
    ) -> Notice:
        assert event in EVENTS, event
        notice = self.notice(event, agent=agent, instance=instance, task=task, **data)
        if self._heard is not None:
            self._heard(event, agent, data)
        self._deliver(notice)
        if self._relay is not None:
            self._relay.send(_relayed(self._origin, notice))
        return notice

    def relay(
        self,
        event: str,
        *,
        agent: str,
        instance: str | None,
        task: str,
        event_id: str,
        **data: Any,
    ) -> Notice | None:
        """An event of ``task``, a remote child, as its runtime told it (:mod:`.remote_events`):
        to the subscribers of ``task`` and of its ancestors (:meth:`nest`) and through the relay
        to other processes, like a published one; never counted as this process's (``heard``),
        never an approval here, never the child's end (that is told once, when it is settled).
        None when ``event_id`` was told here already (every process on a shared store follows
        the child, and each relays what it reads)."""
        assert event in EVENTS and event not in TASK_ENDS | APPROVAL_EVENTS, event
        if not self._first_relay(event_id):
            return None
        notice = self.notice(
            event, agent=agent, instance=instance, task=task, event_id=event_id, **data
        )
        self._deliver(notice)
        if self._relay is not None:
            self._relay.send(_relayed(self._origin, notice))
        return notice

    def _first_relay(self, event_id: object) -> bool:
        """Whether a remote child's event ``event_id`` is new here (the last
        :data:`_REMEMBERED_RELAYS` are remembered)."""
        if not isinstance(event_id, str) or event_id in self._relays:
            return False
        if len(self._relay_order) == _REMEMBERED_RELAYS:
            self._relays.discard(self._relay_order.popleft())
        self._relay_order.append(event_id)
        self._relays.add(event_id)
        return True

    def notice(
        self,
        event: str,
        *,
        agent: str,
        instance: str | None,
        task: str | None = None,
        **data: Any,
    ) -> Notice:
        """A notice numbered in this process's sequence, delivered to no one (a stream that
        tells of an end it read from the task's record)."""
        return Notice(next(self._numbers), event, agent, instance, task, self._clock.now(), data)

    def _deliver(self, notice: Notice) -> None:
        task = notice.task
        keys: list[tuple[str, ...]] = [("task", task)] if task is not None else []
        if task is not None and task in self._above:
            keys += [("task", above) for above in self._above[task]]
        if task is not None and notice.event in TASK_ENDS:
            # Told here (or relayed from the process that settled it): what was kept for the
            # task is forgotten, so a long-lived process keeps nothing per ended task.
            self._above.pop(task, None)
            self._once.pop(task, None)
        if notice.instance is not None:
            keys.append(("instance", notice.agent, notice.instance))
        if notice.event in APPROVAL_EVENTS:
            keys.append(APPROVALS)
        for key in keys:
            for subscription in self._subscribers.get(key, ()):
                subscription.offer(notice)

    def _received(self, payload: str) -> None:
        """A notice another process sent through the relay: to this process's subscribers."""
        try:
            sent = json.loads(payload)
            if sent.get("origin") == self._origin or sent.get("event") not in EVENTS:
                return
            relayed = (sent.get("data") or {}).get("remote") is not None
            if relayed and not self._first_relay(sent["data"].get("event_id")):
                return  # a remote child's event this process relayed (or heard) already
            notice = Notice(
                next(self._numbers),
                sent["event"],
                sent["agent"],
                sent.get("instance"),
                sent.get("task"),
                datetime.fromisoformat(sent["at"]),
                dict(sent.get("data") or {}),
            )
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("a relayed task notification was not understood: %s", exc)
            return
        self._deliver(notice)
        told = self._ended_elsewhere
        if told is not None and notice.task is not None and notice.event in TASK_ENDS:
            try:
                told(notice)
            except Exception:  # the relay goes on delivering the others
                log.exception("the end of task %s, told by another process", notice.task)

    def nest(self, task: str, ancestors: Sequence[str]) -> None:
        """``task`` was delegated under ``ancestors``: its events go to their task streams
        too (each carries its own ``agent`` and ``task``), until it ends."""
        if ancestors:
            self._above[task] = tuple(ancestors)

    def once(self, task: str, condition: str) -> bool:
        """True the first time ``condition`` is met for ``task`` (in this process, until the
        task ends)."""
        told = self._once.setdefault(task, set())
        if condition in told:
            return False
        told.add(condition)
        return True

    def watched(self, agent: str, instance: str) -> bool:
        return bool(self._subscribers.get(("instance", agent, instance)))

    def add(self, key: tuple[str, ...], capacity: int | None = None) -> Subscription:
        """A new subscription to ``key``; :meth:`remove` it when done (or use
        :meth:`subscribe`)."""
        subscription = Subscription(capacity or self.buffer)
        self._subscribers.setdefault(key, set()).add(subscription)
        self.listen()  # other processes' notices are wanted once someone here listens
        return subscription

    def listen(self) -> None:
        """Hear other processes' notices from now on (once; on the event loop). The relay
        stops with the store."""
        if self._relay is not None and not self._listening:
            self._listening = True
            self._relay.listen(self._received, self._resync)

    def _resync(self) -> None:
        """The relay hears again after a break: every subscriber, and ``resynced``, re-read
        from the store what they may have missed."""
        for subscriptions in self._subscribers.values():
            for subscription in subscriptions:
                subscription.resync()
        if self._resynced is not None:
            try:
                self._resynced()
            except Exception:  # the subscribers are told all the same
                log.exception("resynchronising after the relay's break")

    def remove(self, key: tuple[str, ...], subscription: Subscription) -> None:
        held = self._subscribers.get(key)
        if held is not None:
            held.discard(subscription)
            if not held:
                del self._subscribers[key]

    @contextmanager
    def subscribe(
        self, key: tuple[str, ...], capacity: int | None = None
    ) -> Iterator[Subscription]:
        subscription = self.add(key, capacity)
        try:
            yield subscription
        finally:
            self.remove(key, subscription)


def _relayed(origin: str, notice: Notice) -> str:
    """The notice as the relay carries it, its own text cut when it would not fit."""
    body = {
        "origin": origin,
        "event": notice.event,
        "agent": notice.agent,
        "instance": notice.instance,
        "task": notice.task,
        "at": notice.at.isoformat(),
        "data": notice.data,
    }
    payload = json.dumps(body, ensure_ascii=False, default=str)
    if len(payload.encode()) <= _RELAYED_BYTES:
        return payload
    cut = {
        k: (v[:_CUT_TEXT] + "…" if isinstance(v, str) and len(v) > _CUT_TEXT else v)
        for k, v in notice.data.items()
    }
    payload = json.dumps({**body, "data": cut}, ensure_ascii=False, default=str)
    if len(payload.encode()) <= _RELAYED_BYTES:
        return payload
    return json.dumps({**body, "data": {"cut": True}}, ensure_ascii=False)
