"""A task ended by another process on the same store: its end, relayed, is handed to the
notifier's ``ended_elsewhere`` here, and so the question its call waits on in this process is
closed with the reason a local end gives (issue 29)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from pathlib import Path

from ankka._kernel.clock import SystemClock
from ankka.runtime.declare.agents import Service
from ankka.runtime.drivers.elicitations import TurnAsker, task_ended
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.drivers.tasks.iteration import heard_ended, publish_ended
from ankka.runtime.drivers.tasks.notify import Notice, Notifier
from ankka.runtime.features.mcp.asking import Answer, Question
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.approvals import ElicitationAnswered
from ankka.runtime.records.registry import Record
from ankka.runtime.records.tasks import TaskState
from ankka.runtime.store.tasks import Ended
from tests.support.eventually import eventually_async
from tests.support.runtimes import runtime_for
from tests.support.stores import OwnedJournalStore, journal_store

CLOCK = SystemClock()


class Relay:
    """The store's relay as PostgreSQL's LISTEN/NOTIFY carries it, in one process: what any
    notifier sends, every listener gets (its sender's included), on the event loop."""

    def __init__(self) -> None:
        self._listeners: list[tuple[Callable[[str], None], Callable[[], None]]] = []

    def send(self, payload: str) -> None:
        loop = asyncio.get_running_loop()
        for deliver, _ in list(self._listeners):
            loop.call_soon(deliver, payload)

    def listen(
        self, deliver: Callable[[str], None], resync: Callable[[], None]
    ) -> Callable[[], None]:
        self._listeners.append((deliver, resync))
        return lambda: self._listeners.remove((deliver, resync))

    def came_back(self) -> None:
        """The listening connection came back after a break: each listener resynchronises."""
        for _, resync in list(self._listeners):
            resync()


async def test_only_another_processs_task_ends_are_handed_to_ended_elsewhere() -> None:
    relay = Relay()
    heard: list[Notice] = []
    here = Notifier(CLOCK, relay=relay, ended_elsewhere=heard.append)
    here.listen()  # nobody subscribes here: the hook alone wants the relay
    there = Notifier(CLOCK, relay=relay)
    there.publish("iteration_started", agent="a", instance="i", task="t1")
    there.publish("task_cancelled", agent="a", instance="i", task="t1", reason="cancelled")
    here.publish("task_failed", agent="a", instance="i", task="t2", reason="its own")
    there.publish("activated", agent="a", instance="i")
    await asyncio.sleep(0)  # the relay delivers on the loop
    assert [(n.event, n.task, n.data) for n in heard] == [
        ("task_cancelled", "t1", {"reason": "cancelled"})
    ]


@contextlib.asynccontextmanager
async def asking_runtime(
    tmp_path: Path,
) -> AsyncIterator[tuple[Runtime, OwnedJournalStore, ScriptedProvider]]:
    """A started runtime on SQLite whose desk holds questions, and its store and provider."""
    store = await journal_store(tmp_path / "j.sqlite3")
    provider = ScriptedProvider([], name="default")
    runtime = runtime_for(
        Service("asking"),
        store=store,
        providers={"default": provider},
        approvals=store.store.approvals,
    )
    async with runtime:
        yield runtime, store, provider


async def test_a_question_is_closed_when_another_process_cancels_its_task(
    tmp_path: Path,
) -> None:
    async with asking_runtime(tmp_path) as (runtime, store, provider):
        desk = runtime.questions
        kept: list[Record] = []

        async def keep(records: Sequence[Record]) -> None:
            kept.extend(records)

        asker = TurnAsker(
            desk,
            "task:t1",
            "purchaser",
            "turn-1",
            0,
            None,
            provider,
            runtime.context.executor.ledger(),
            record=keep,
            notify=lambda event, data: None,
        )
        relay = Relay()
        here = Notifier(CLOCK, relay=relay, ended_elsewhere=partial(heard_ended, desk))
        here.listen()
        there = Notifier(CLOCK, relay=relay)
        question = Question("catalog", "mcp__catalog__buy", "call-1", "How many?", {}, 600.0)
        asked = asyncio.create_task(desk.ask(asker, question))
        index = store.store.approvals

        async def waiting() -> bool:
            return bool(await index.find(state="pending"))

        await eventually_async(waiting, what="the question waiting")
        cancelled = Ended("t1", "purchaser", "desk", TaskState.CANCELLED, "cancelled")
        publish_ended(there, [cancelled])  # the other process ended it, and holds nothing
        answer = await asyncio.wait_for(asked, 10)

    assert answer == Answer("cancel")
    (answered,) = kept
    assert isinstance(answered, ElicitationAnswered)
    assert answered.action == "cancel"
    assert answered.decided.decision == "ended" and answered.decided.decided_by == "platform"
    wording = "the task that asked ended (cancelled) before it was answered"
    assert answered.decided.reason == wording == task_ended("cancelled", "cancelled")
