"""What a task iteration costs the store (issue 23): two round trips (the answer with its
marks and the task row's completion in one transaction; the tool result with where the task
stands read back in another), and no read of the session's history: the instance keeps its
session's fold, and reads what a compaction appended only after the consumer says it did.
Counted at the store's seam (its one :class:`Database`: a call is a transaction) on SQLite and
on PostgreSQL, each a real store."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ankka.runtime.providers.base import ModelRequest, ModelResponse
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.registry import StoredEvent
from ankka.runtime.store.database import Database, NoticeRelay, Row, SharedSessionLock, Transaction
from ankka.runtime.store.open import Store
from examples.tasks import service as example
from examples.team import service as team
from tests.support.postgres import fresh_database
from tests.support.runtimes import make_context, task_host_for
from tests.unit.runtime.conftest import NO_PAUSE, put
from tests.unit.runtime.drivers.tasks.test_iteration import GOOD, complete

T = TypeVar("T")
TEAM_SCRIPT = json.loads(Path("examples/team-standin.json").read_text())


@dataclass
class Watched:
    """A transaction that counts its statements and the journal events its reads return."""

    inner: Transaction
    counting: Counting
    statements: int = 0

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        self.statements += 1
        return self.inner.rows(sql, params)

    def append(
        self, session: str, events: Sequence[tuple[str, str]], *, expected: int, at: datetime
    ) -> int:
        self.statements += 1
        return self.inner.append(session, events, expected=expected, at=at)

    def events(self, session: str, *, after: int = 0) -> list[StoredEvent]:
        self.statements += 1
        if after == 0:
            self.counting.whole_reads += 1
        found = self.inner.events(session, after=after)
        self.counting.events_read += len(found)
        return found

    def sessions(self) -> list[str]:
        return self.inner.sessions()

    def journal_table(self) -> str:
        return self.inner.journal_table()

    def json_text(self, column: str, key: str) -> str:
        return self.inner.json_text(column, key)

    def stamp(self) -> str:
        return self.inner.stamp()


@dataclass(frozen=True)
class Trip:
    """One round trip: the asyncio task that made it, and the statements it carried."""

    by: asyncio.Task[Any] | None
    statements: int


@dataclass(frozen=True)
class ModelAsked:
    """The model was called, by this asyncio task (where one iteration ends and the next
    begins)."""

    by: asyncio.Task[Any] | None


@dataclass
class Counting:
    """The store's one database, counting its round trips (one call, one transaction), in
    order with the model's calls (``seen``)."""

    inner: Database
    seen: list[Trip | ModelAsked] = field(default_factory=list)
    events_read: int = 0
    whole_reads: int = 0

    async def _counted(self, run: Callable[[Callable[[Transaction], T]], Awaitable[T]],
                       work: Callable[[Transaction], T]) -> T:  # fmt: skip
        watched: list[Watched] = []

        def counted(tx: Transaction) -> T:
            watched.append(Watched(tx, self))
            return work(watched[-1])

        try:
            return await run(counted)
        finally:
            statements = sum(w.statements for w in watched)
            self.seen.append(Trip(asyncio.current_task(), statements))

    async def write(self, work: Callable[[Transaction], T], *, serial: bool = True) -> T:
        return await self._counted(lambda w: self.inner.write(w, serial=serial), work)

    async def read(self, work: Callable[[Transaction], T]) -> T:
        return await self._counted(self.inner.read, work)

    @property
    def shared(self) -> bool:
        return self.inner.shared

    @property
    def where(self) -> str:
        return self.inner.where

    def session_lock(self) -> SharedSessionLock | None:
        return self.inner.session_lock()

    def notices(self) -> NoticeRelay | None:
        return self.inner.notices()

    async def close(self) -> None:
        await self.inner.close()

    def iterations(self) -> list[list[Trip]]:
        """The round trips the iterating task made between one model call and the next:
        one list per iteration that was followed by another."""
        asked = [i for i, seen in enumerate(self.seen) if isinstance(seen, ModelAsked)]
        spans: list[list[Trip]] = []
        for start, end in itertools.pairwise(asked):
            by = self.seen[start].by
            spans.append(
                [t for t in self.seen[start + 1 : end] if isinstance(t, Trip) and t.by is by]
            )
        return spans


class Marking(ScriptedProvider):
    """The scripted model, marking each call in the counted database's order."""

    def __init__(self, script: list[dict[str, Any]], counting: Counting) -> None:
        super().__init__(script, name="default")
        self._counting = counting

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self._counting.seen.append(ModelAsked(asyncio.current_task()))
        return await super().complete(request)


async def work_one_task(url: str | Path, script: list[dict[str, Any]]) -> tuple[Counting, int]:
    """Work task t1 (examples.tasks' researcher) to its end on a new store at ``url``; the
    counted database and the iterations the task used."""
    database = Counting((await Store.open(url)).database)
    store = Store(database)  # every view on the counted database
    provider = Marking(script, database)
    context = make_context(
        example,
        store=store.journal_store,
        providers={"default": provider},
    )
    # The scheduler looks for work only when poked (a put does), so what is counted is the
    # task's own work.
    host = task_host_for(context, store.tasks, retry=NO_PAUSE, poll_seconds=3600)
    try:
        async with context, host:
            with host.notifier.subscribe(("task", "t1")) as heard:
                await put(host, "t1")
                # Told, not polled: the waiting costs the store nothing.
                while getattr(await heard.next(), "event", None) not in (
                    "task_completed",
                    "task_failed",
                ):
                    pass
            used = (await host.get("t1")).iterations_used
    finally:
        await store.close()
    return database, used


def lookup(n: int) -> dict[str, Any]:
    """A lookup of a topic of its own (the same call asked again is stopped as repeated)."""
    return {"tool_calls": [{"name": "lookup", "arguments": {"topic": f"ankka {n}"}}]}


@pytest.fixture(params=["sqlite", "postgresql"])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], str | Path]:
    """Makes a new, empty store of the parameter's kind for each name asked."""
    if request.param == "sqlite":
        return lambda name: tmp_path / f"{name}.sqlite3"
    server = request.getfixturevalue("postgres_server")
    return lambda name: fresh_database(server, f"trips_{name}")


async def test_each_iteration_costs_two_round_trips_and_reads_no_history(
    new_store: Callable[[str], str | Path],
) -> None:
    five = [lookup(n) for n in range(4)] + [complete(GOOD)]
    counted, used = await work_one_task(new_store("five"), five)
    assert used == 5
    iterations = counted.iterations()
    assert len(iterations) == 4  # every iteration but the last is followed by a model call
    # Two round trips each, made by the iterating task between one model call and the next
    # (the answer with its marks and the task row's completion; the tool result, with the
    # task's and its instance's rows read back). Within them, at most nine statements (each
    # a round trip to a PostgreSQL server): the answer's append, on PostgreSQL its hold of the
    # instance's lease (a process that lost it records nothing), the task's row and its tree's
    # read, the row's update returning the row (not read again); the tool result's append,
    # the task's and its tree's rows and the instance's (on PostgreSQL its lease hold returns
    # it, not read again).
    assert [len(trips) for trips in iterations] == [2, 2, 2, 2], iterations
    assert all(sum(t.statements for t in trips) <= 9 for trips in iterations), iterations
    # Nothing the instance wrote is read back: its fold is its own. The session is read from
    # its start only before the first model call (of nothing yet).
    assert counted.events_read == 0


async def test_a_child_costs_three_round_trips_from_its_worker_to_its_first_model_call(
    new_store: Callable[[str], str | Path],
) -> None:
    # The lead of examples/team.py delegates two summaries in one answer: the answer's
    # children are made in one transaction (their instances claimed in it), and each child's
    # worker, started at once, reads its instance with its next task, then its session, and
    # starts it reading back where it stands: three round trips, then its first model call.
    database = Counting((await Store.open(new_store("tree"))).database)
    store = Store(database)
    provider = Marking(TEAM_SCRIPT, database)
    context = make_context(team, store=store.journal_store, providers={"default": provider})
    host = task_host_for(context, store.tasks, retry=NO_PAUSE, poll_seconds=3600)
    try:
        async with context, host:
            await put(host, "r1", "Report on sqlite and postgresql.", agent="lead", kind="report")
            assert (await host.wait("r1", 30)).state.value == "completed"
    finally:
        await store.close()
    asked = [s.by for s in database.seen if isinstance(s, ModelAsked)]
    lead, children = asked[0], [by for by in dict.fromkeys(asked) if by is not asked[0]][:2]
    assert len(children) == 2 and lead not in children
    for child in children:
        first = next(i for i, s in enumerate(database.seen) if getattr(s, "by", 0) is child)
        before = [s for s in database.seen[first:] if s.by is child]
        until = next(i for i, s in enumerate(before) if isinstance(s, ModelAsked))
        assert until == 3, before
