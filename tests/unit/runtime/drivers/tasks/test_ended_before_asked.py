"""A task ended in the gap between showing ``awaiting-approval`` and its question being
registered in the desk (issue 29): the end finds no question to close, so the desk remembers the
ended task session and closes the question at once when it is registered, with the end's reason,
journaled and answered ``cancel`` like any ended question. Bounded; other sessions unaffected."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ankka.runtime.drivers.elicitations import (
    ENDED_KEPT,
    ENDED_REASON,
    ElicitationDesk,
    TurnAsker,
    task_ended,
)
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.drivers.tasks.iteration import heard_ended, publish_ended
from ankka.runtime.drivers.tasks.notify import Notice, Notifier
from ankka.runtime.features.mcp.asking import Answer, Question
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.approvals import ElicitationAnswered
from ankka.runtime.records.registry import Record
from ankka.runtime.records.tasks import TaskState
from ankka.runtime.store.approval_index import ApprovalIndex
from ankka.runtime.store.tasks import Ended
from tests.support.eventually import eventually_async
from tests.support.stores import OwnedJournalStore
from tests.unit.runtime.drivers.tasks.test_ended_elsewhere import CLOCK, Relay, asking_runtime

CANCELLED = task_ended("cancelled", "cancelled")


@dataclass
class Rig:
    runtime: Runtime
    store: OwnedJournalStore
    provider: ScriptedProvider

    @property
    def desk(self) -> ElicitationDesk:
        return self.runtime.questions

    @property
    def index(self) -> ApprovalIndex:
        return self.store.store.approvals


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with asking_runtime(tmp_path) as (runtime, store, provider):
        yield Rig(runtime, store, provider)


@dataclass
class Asked:
    """One asker, with what it journaled and what it told."""

    asker: TurnAsker
    kept: list[Record]
    told: list[tuple[str, dict[str, Any]]]

    @property
    def answered(self) -> ElicitationAnswered:
        (answered,) = self.kept
        assert isinstance(answered, ElicitationAnswered)
        return answered


def asker(
    rig: Rig, session: str, waiting: Callable[[bool], Awaitable[None]] | None = None
) -> Asked:
    kept: list[Record] = []
    told: list[tuple[str, dict[str, Any]]] = []

    async def keep(records: Sequence[Record]) -> None:
        kept.extend(records)

    made = TurnAsker(
        rig.desk,
        session,
        "purchaser",
        f"{session}#1",
        0,
        None,
        rig.provider,
        rig.runtime.context.executor.ledger(),
        record=keep,
        notify=lambda event, data: told.append((event, data)),
        waiting=waiting,
    )
    return Asked(made, kept, told)


def question(timeout: float = 600.0) -> Question:
    return Question("catalog", "mcp__catalog__buy", "call-1", "How many?", {}, timeout)


async def closed_at_once(rig: Rig, asked: Asked, reason: str) -> None:
    """The question was closed with ``reason``: server answered cancel, journaled once as
    ended by the platform, its row closed, heard requested then decided."""
    answered = asked.answered
    assert answered.action == "cancel"
    decided = answered.decided
    assert (decided.decision, decided.decided_by, decided.reason) == ("ended", "platform", reason)
    row = await rig.index.get(answered.request.id)
    assert row is not None and (row.state, row.open) == ("ended", False)
    assert not await rig.index.find(state="pending")
    assert [event for event, _ in asked.told] == ["approval_requested", "approval_decided"]
    assert asked.told[1][1]["decision"] == "ended"


async def test_a_task_cancelled_here_before_its_question_is_registered_closes_it_at_once(
    rig: Rig,
) -> None:
    async def waiting(now: bool) -> None:
        if now:  # the task shows awaiting-approval; the question is not registered yet
            assert rig.desk.end_task("t1", "cancelled", "cancelled") == 0  # nothing to close

    asked = asker(rig, "task:t1", waiting)
    answer = await asyncio.wait_for(rig.desk.ask(asked.asker, question()), 10)

    assert answer == Answer("cancel")
    await closed_at_once(rig, asked, CANCELLED)


async def test_a_task_cancelled_elsewhere_before_its_question_is_registered_closes_it(
    rig: Rig,
) -> None:
    relay = Relay()
    heard = asyncio.Event()

    def ended_elsewhere(notice: Notice) -> None:
        heard_ended(rig.desk, notice)
        heard.set()

    here = Notifier(CLOCK, relay=relay, ended_elsewhere=ended_elsewhere)
    here.listen()
    there = Notifier(CLOCK, relay=relay)
    reason = "its parent ended"

    async def waiting(now: bool) -> None:
        if now:  # the other process ends it in the gap, and this one hears it there
            publish_ended(there, [Ended("t1", "purchaser", "desk", TaskState.FAILED, reason)])
            await heard.wait()

    asked = asker(rig, "task:t1", waiting)
    answer = await asyncio.wait_for(rig.desk.ask(asked.asker, question()), 10)

    assert answer == Answer("cancel")
    await closed_at_once(rig, asked, task_ended("failed", reason))


async def waits_for_a_person(rig: Rig, asked: Asked) -> Answer:
    """The question is registered and waits; a person approves it."""
    task = asyncio.create_task(rig.desk.ask(asked.asker, question()))

    async def registered() -> list[str] | None:
        ids = [d["id"] for e, d in asked.told if e == "approval_requested"]
        return ids or None

    (approval,) = await eventually_async(registered, what="the question registered")
    assert not task.done()
    await rig.desk.answer(
        approval, "approved", None, content={}, reason="", decided_by="p", caller=None
    )
    return await asyncio.wait_for(task, 10)


async def test_an_ended_task_leaves_other_tasks_and_request_sessions_asking(rig: Rig) -> None:
    rig.desk.end_task("t1", "cancelled", "cancelled")
    for session in ("task:t2", "t1", "session-1"):  # another task; request sessions
        asked = asker(rig, session)
        assert await waits_for_a_person(rig, asked) == Answer("accept", {})
        assert asked.answered.decided.decision == "approved"


async def test_the_ended_sessions_remembered_are_bounded_oldest_forgotten_first(
    rig: Rig,
) -> None:
    rig.desk.end_task("t0", "cancelled", "cancelled")
    for n in range(1, ENDED_KEPT + 1):
        rig.desk.end_task(f"t{n}", "failed", "x" * (2 * ENDED_REASON))

    forgotten = asker(rig, "task:t0")  # pushed out: its question waits as any does
    answer = await asyncio.wait_for(rig.desk.ask(forgotten.asker, question(0.2)), 10)
    assert answer == Answer("cancel")
    assert forgotten.answered.decided.decision == "expired"

    newest = asker(rig, f"task:t{ENDED_KEPT}")  # still remembered, its reason cut
    answer = await asyncio.wait_for(rig.desk.ask(newest.asker, question()), 10)
    assert answer == Answer("cancel")
    reason = newest.answered.decided.reason
    assert newest.answered.decided.decision == "ended"
    assert len(reason) == ENDED_REASON + 1 and reason.endswith("…")
    assert reason[:-1] == task_ended("failed", "x" * (2 * ENDED_REASON))[:ENDED_REASON]
