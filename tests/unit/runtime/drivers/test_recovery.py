"""Recovery at start, row by row (issue 29): one row or session that cannot be recovered
stops neither the start nor the others, and a session whose turn lock a turn holds is waited
for a bounded time, then left to that turn. On SQLite and on PostgreSQL, where the lock is
held by another store's connection (another pod)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ankka._kernel.clock import ManualClock
from ankka.runtime.drivers.elicitations import RECOVERY_PAGE, RESTARTED
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.engine.sessions import SessionQueue
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.approvals import (
    ApprovalDecided,
    ApprovalRequest,
    ElicitationAnswered,
    TurnEnded,
)
from ankka.runtime.store.approval_index import ApprovalIndex, IndexRow
from ankka.runtime.store.open import Store
from tests.support.postgres import fresh_database
from tests.support.runtimes import runtime_for
from tests.support.stores import OwnedJournalStore, journal_store
from tests.unit.runtime.drivers.test_approvals import START, refund_call, request_turn, service

SUSPENDING = {"tool_calls": [refund_call("A1", 250)]}
NEWER = ("a_record_of_a_newer_version", "{}")  # what an older version cannot read
TOOL = "mcp__catalog__buy"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "store.sqlite3")
    return fresh_database(request.getfixturevalue("postgres_server"), "recovery")


class Runtimes:
    """One runtime on the store at a time, as one process restarted."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.made: list[Runtime] = []
        self.store: OwnedJournalStore | None = None

    async def build(self, script: Sequence[dict[str, Any] | str] = ()) -> Runtime:
        """A runtime on the store, not started yet (its recovery runs as it starts)."""
        for r in self.made:
            await r.aclose()
        self.made.clear()
        self.store = await journal_store(self.url)  # the runtime's aclose closes it
        clock = ManualClock(START)
        runtime = runtime_for(
            service(),
            store=self.store,
            providers={"default": ScriptedProvider(script, name="default", clock=clock)},
            clock=clock,
            approvals=self.store.store.approvals,
            approval_tick_seconds=3600,
        )
        self.made.append(runtime)
        return runtime

    async def started(self, script: Sequence[dict[str, Any] | str] = ()) -> Runtime:
        runtime = await self.build(script)
        async with asyncio.timeout(60):  # a start that never returns fails here
            await runtime.__aenter__()
        return runtime

    @property
    def index(self) -> ApprovalIndex:
        assert self.store is not None
        return self.store.store.approvals

    async def aclose(self) -> None:
        for r in self.made:
            await r.aclose()


@pytest.fixture
async def runtimes(url: str) -> AsyncIterator[Runtimes]:
    made = Runtimes(url)
    yield made
    await made.aclose()


async def suspended(runtime: Runtime, session: str) -> ApprovalRequest:
    result = await runtime.run(runtime.plan("refunds", session, "refund"))
    (request,) = result.awaiting
    return request


async def cut_off(runtime: Runtime, session: str) -> ApprovalRequest:
    """A turn suspended, its decision recorded, and then the process died (no resume ran)."""
    request = await suspended(runtime, session)
    entries = await runtime.context.journal.read(session)
    decision = ApprovalDecided(request.id, request_turn(entries), "approved", "", "a", START)
    await runtime.context.journal.append(session, [decision], expected=entries[-1].seq)
    return request


async def asked(index: ApprovalIndex, approval: str, session: str, seconds: int) -> None:
    """A server's question of a request turn, pending as a runtime stopped."""
    at = START + timedelta(seconds=seconds)
    await index.schedule(session, "refunds", [(approval, TOOL, at + timedelta(hours=1))], at)


async def row(index: ApprovalIndex, approval: str) -> IndexRow:
    found = await index.get(approval)
    assert found is not None
    return found


async def last_record(runtime: Runtime, session: str) -> object:
    return (await runtime.context.journal.read(session))[-1].record


def lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


async def test_a_question_that_cannot_be_ended_is_closed_and_the_others_are_ended(
    runtimes: Runtimes, caplog: pytest.LogCaptureFixture
) -> None:
    async with await Store.open(runtimes.url) as before:  # the runtime that stopped
        await before.approvals.create()
        # Asked first: a question of a session whose journal this version cannot read.
        await asked(before.approvals, "eli_unreadable", "unreadable", 0)
        await before.journal_store.append("unreadable", [NEWER], expected=0)
        await asked(before.approvals, "eli_good", "good", 1)
    caplog.set_level(logging.INFO, "ankka.approvals")
    runtime = await runtimes.started()  # the restart: it starts
    ended = await last_record(runtime, "good")
    assert isinstance(ended, ElicitationAnswered) and ended.action == "cancel"
    assert (ended.decided.decision, ended.decided.reason) == ("ended", RESTARTED)
    for approval in ("eli_good", "eli_unreadable"):
        settled = await row(runtimes.index, approval)
        assert (settled.state, settled.open) == ("ended", False), approval
    [warned] = [line for line in lines(caplog, logging.WARNING) if "eli_unreadable" in line]
    assert "session unreadable" in warned and "ValueError" in warned, warned
    assert "no longer pending" in warned, warned
    assert await runtimes.index.find(state="pending") == []


async def test_a_session_whose_approvals_cannot_be_recovered_leaves_the_others_recovered(
    runtimes: Runtimes, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = await runtimes.started([SUSPENDING, SUSPENDING])
    unreadable = await suspended(runtime, "unreadable")
    assert runtimes.store is not None
    entries = await runtime.context.journal.read("unreadable")
    await runtimes.store.append("unreadable", [NEWER], expected=entries[-1].seq)
    await cut_off(runtime, "s")
    caplog.set_level(logging.INFO, "ankka.approvals")
    runtime = await runtimes.started()  # the restart: it starts
    ended = await last_record(runtime, "s")
    assert isinstance(ended, TurnEnded) and ended.cause == "cut_off"
    [warned] = [line for line in lines(caplog, logging.WARNING) if "unreadable" in line]
    assert "ValueError" in warned and "left open" in warned, warned
    # Its request is left as it was: a person may decide it once its journal can be read.
    left = await row(runtimes.index, unreadable.id)
    assert (left.state, left.open) == ("pending", True)


@contextlib.asynccontextmanager
async def held(
    runtimes: Runtimes, runtime: Runtime, sessions: Sequence[str]
) -> AsyncIterator[None]:
    """The turn locks of ``sessions`` held by a turn: on PostgreSQL another pod's (another
    store's connection, its advisory lock), on SQLite (one process only) this process's."""
    async with contextlib.AsyncExitStack() as stack:
        queue = runtime.context.queue
        other = await Store.open(runtimes.url)
        stack.push_async_callback(other.close)
        lock = other.journal_store.session_lock()
        if lock is not None:
            queue = SessionQueue(lock)
        for session in sessions:
            await stack.enter_async_context(queue.turn(session))
        yield


async def test_a_start_waits_a_bounded_time_for_a_held_session_and_recovers_it_later(
    runtimes: Runtimes, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = await runtimes.started([SUSPENDING])
    request = await cut_off(runtime, "s")
    await asked(runtimes.index, "eli_q", "q", 0)
    decided = await last_record(runtime, "s")
    runtime = await runtimes.build()
    caplog.set_level(logging.INFO, "ankka.approvals")
    async with held(runtimes, runtime, ["s", "q"]):
        async with asyncio.timeout(60):  # a start that waits for the turns fails here
            await runtime.__aenter__()
        # Started: both left to the turn that holds them, and said so.
        assert await last_record(runtime, "s") == decided
        assert (await row(runtimes.index, "eli_q")).state == "pending"
        said = lines(caplog, logging.INFO)
        assert any("session s" in line and "held" in line for line in said), said
        assert any("eli_q" in line and "in flight" in line for line in said), said
    # The turns gone, the next recovery ends both (questions first, as at a start). A lock
    # the start stopped waiting for can still be granted to it just after the turns let go,
    # then given back (PostgresDatabase._taken_too_late): a turn waiting its turn, as a later
    # one would, knows both free, so the recovery's bounded wait never meets that moment.
    for session in ("s", "q"):
        async with runtime.context.queue.turn(session):
            pass
    await runtime.questions.recover()
    await runtime.approvals.recover()
    ended = await last_record(runtime, "q")
    assert isinstance(ended, ElicitationAnswered) and ended.decided.reason == RESTARTED
    ended = await last_record(runtime, "s")
    assert isinstance(ended, TurnEnded) and ended.cause == "cut_off"
    assert (await row(runtimes.index, request.id)).open is False


async def test_every_pending_question_is_ended_however_many_rows_wait(
    runtimes: Runtimes,
) -> None:
    many = RECOVERY_PAGE + 1
    async with await Store.open(runtimes.url) as before:  # the runtime that stopped
        index = before.approvals
        await index.create()
        # Older than every question: more pending tool approvals of tasks than a page holds
        # (a task's instance settles them when it resumes: they stay pending).
        tools = [(f"apr_{n:04}", "refund", START + timedelta(hours=1)) for n in range(many)]
        await index.schedule("task:waits", "refunds", tools, START)
        later = START + timedelta(seconds=1)
        asked_by_task = [(f"eli_t{n:04}", TOOL, later + timedelta(hours=1)) for n in range(many)]
        await index.schedule("task:asks", "refunds", asked_by_task, later)
        await asked(index, "eli_last", "last", 2)  # a request turn's, the newest row
    runtime = await runtimes.started()  # the restart: it starts
    for approval in ("eli_t0000", f"eli_t{many - 1:04}", "eli_last"):
        settled = await row(runtimes.index, approval)
        assert (settled.state, settled.open) == ("ended", False), approval
    ended = await last_record(runtime, "last")
    assert isinstance(ended, ElicitationAnswered) and ended.decided.reason == RESTARTED
    pending = await runtimes.index.find(state="pending", limit=10 * many)
    assert sorted(r.id for r in pending) == [approval for approval, _, _ in tools]
