"""What a task iteration costs the store (issue 23): two round trips (the answer with its
marks and the task row's completion in one transaction; the tool result with where the task
stands read back in another), and no read of the session's history: the instance keeps its
session's fold, and reads what a compaction appended only after the consumer says it did.
Counted at the store's seam (its one :class:`Database`: a call is a transaction) on SQLite and
on PostgreSQL, each a real store."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.registry import StoredEvent
from ankka.runtime.store.database import Database, NoticeRelay, Row, SharedSessionLock, Transaction
from ankka.runtime.store.open import Store
from examples.tasks import service as example
from tests.support.postgres import fresh_database
from tests.support.runtimes import make_context, task_host_for
from tests.unit.runtime.conftest import NO_PAUSE, put
from tests.unit.runtime.drivers.tasks.test_iteration import GOOD, complete

T = TypeVar("T")


@dataclass
class Watched:
    """A transaction that counts the journal events its reads return."""

    inner: Transaction
    counting: Counting

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        self.counting.statements += 1
        return self.inner.rows(sql, params)

    def append(
        self, session: str, events: Sequence[tuple[str, str]], *, expected: int, at: datetime
    ) -> int:
        self.counting.statements += 1
        return self.inner.append(session, events, expected=expected, at=at)

    def events(self, session: str, *, after: int = 0) -> list[StoredEvent]:
        self.counting.statements += 1
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


@dataclass
class Counting:
    """The store's one database, counting its round trips (one call, one transaction)."""

    inner: Database
    trips: int = 0
    statements: int = 0
    events_read: int = 0
    whole_reads: int = 0

    async def write(self, work: Callable[[Transaction], T], *, serial: bool = True) -> T:
        self.trips += 1
        return await self.inner.write(lambda tx: work(Watched(tx, self)), serial=serial)

    async def read(self, work: Callable[[Transaction], T]) -> T:
        self.trips += 1
        return await self.inner.read(lambda tx: work(Watched(tx, self)))

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


async def work_one_task(url: str | Path, script: list[dict[str, Any]]) -> tuple[Counting, int]:
    """Work task t1 (examples.tasks' researcher) to its end on a new store at ``url``; the
    counted database and the iterations the task used."""
    database = Counting((await Store.open(url)).database)
    store = Store(database)  # every view on the counted database
    provider = ScriptedProvider(script, name="default")
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
    two = [lookup(0), complete(GOOD)]
    five = [lookup(n) for n in range(4)] + [complete(GOOD)]
    short, used_short = await work_one_task(new_store("two"), two)
    long, used_long = await work_one_task(new_store("five"), five)
    assert (used_short, used_long) == (2, 5)
    # Three iterations more, six round trips more: two each, whatever the task's own setup.
    assert long.trips - short.trips == 2 * (5 - 2), (short.trips, long.trips)
    # Nothing the instance wrote is read back: its fold is its own (the session is read from
    # its start once, when the task starts and there is nothing in it yet).
    assert short.events_read == long.events_read == 0
    # Reads of a session from its start are the task's own (made before its first iteration,
    # of nothing yet), none an iteration's.
    assert long.whole_reads == short.whole_reads
    # Within those two transactions, statements (each a round trip to a PostgreSQL server):
    # the answer's append, the task's row and its tree's read, the row's update (returning
    # the row, not read again); the tool result's append, the task's, its tree's and its
    # instance's rows read back. At most eight an iteration.
    assert long.statements - short.statements <= 8 * (5 - 2), (short.statements, long.statements)
