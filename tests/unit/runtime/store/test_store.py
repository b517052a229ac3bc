"""One database per store URL: the journal, the task tables, the approval index and the
leases are views of it, and a journal append can share a transaction with a task's row
(SQLite and PostgreSQL alike)."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import psycopg
import pytest

from ankka.runtime.records.iterations import IterationCompleted, IterationStarted
from ankka.runtime.records.messages import AssistantMessage, ModelCall, Usage, UserMessage
from ankka.runtime.records.registry import Record
from ankka.runtime.records.tasks import TaskRecord, TaskSpec
from ankka.runtime.store import task_statements as statements
from ankka.runtime.store.database import Transaction
from ankka.runtime.store.journal_store import ConcurrentAppend
from ankka.runtime.store.open import Store
from ankka.runtime.store.sqlite import SqliteDatabase
from tests.support.eventually import eventually_async

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
CALL = ModelCall("p", "m", "researcher", 1.0, Usage(7, 3))
ANSWER = AssistantMessage("done", (), "researcher", "t1#1", CALL)


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        url = str(tmp_path / "store.sqlite3")
    else:
        dsn: str = request.getfixturevalue("postgres_server")
        database = f"store_{uuid.uuid4().hex[:12]}"
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(f"CREATE DATABASE {database}")
        url = dsn.rsplit("/", 1)[0] + f"/{database}"
    async with await Store.open(url) as opened:
        yield opened


async def a_task(store: Store, task: str = "t1") -> TaskRecord:
    spec = TaskSpec("researcher", "summary", "Summarise ankka.")
    record, _, _ = await store.tasks.write(
        partial(statements.put, task=task, spec=spec, instance=None, budget=5,
                created_by="local", may_read=statements.read_any, now=NOW)
    )  # fmt: skip
    return record


def completion(task: str = "t1") -> partial[TaskRecord | None]:
    return partial(statements.complete_iteration, task=task, number=1, usage=Usage(7, 3), now=NOW)


def _connections_to(path: Path) -> int:
    """How many open descriptors of this process name the database file itself."""
    fds = Path(f"/proc/{os.getpid()}/fd")
    found = 0
    for fd in fds.iterdir():
        try:
            if Path(os.readlink(fd)) == path.resolve():
                found += 1
        except OSError:
            continue
    return found


async def test_a_sqlite_store_is_opened_once_with_one_writer_and_one_reader(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.sqlite3"
    before = {t.name for t in threading.enumerate()}
    async with await Store.open(path) as store:
        await a_task(store)
        await store.journal.append("s1", [UserMessage("hi", "a", "t1")], expected=0)
        await store.approvals.schedule("s1", "a", [("ap1", "refund", None)], NOW)
        await store.leases.acquire("s1", "me", timedelta(seconds=5))
        assert _connections_to(path) == 2  # the writer's connection and the reader's
        threads = {t.name for t in threading.enumerate()} - before
        writers = [t for t in threads if t.startswith("ankka-sqlite") and "read" not in t]
        readers = [t for t in threads if t.startswith("ankka-sqlite-read")]
        assert len(writers) == 1 and len(readers) == 1, threads


async def test_journal_appends_and_task_writes_share_the_one_writers_commits(
    tmp_path: Path,
) -> None:
    async with await Store.open(tmp_path / "store.sqlite3") as store:
        await a_task(store)
        database = store.database
        assert isinstance(database, SqliteDatabase)
        first = database.commits
        busy, release = threading.Event(), threading.Event()

        def slow(tx: Transaction) -> None:
            busy.set()
            release.wait(10)  # the writer is busy while the others queue behind it

        head = asyncio.ensure_future(store.tasks.write(slow))
        assert await asyncio.to_thread(busy.wait, 10), "the writer never ran the slow write"
        queued: list[asyncio.Future[object]] = [
            asyncio.ensure_future(store.journal.append(f"s{n}", [ANSWER], expected=0))
            for n in range(8)
        ]
        queued.append(asyncio.ensure_future(store.tasks.write(completion(), serial=False)))

        async def all_queued() -> bool:
            return database.queued == 9

        await eventually_async(all_queued, what="the nine writes queued behind the slow one")
        release.set()
        await head
        await asyncio.gather(*queued)
        assert database.commits - first == 2  # the slow one; then the journal's and the task's


async def test_a_combined_commit_writes_the_records_and_the_task_row_together(
    store: Store,
) -> None:
    await a_task(store)
    records: list[Record] = [IterationStarted(1), ANSWER, IterationCompleted(1, Usage(7, 3))]
    done = await store.journal.commit("task:t1", records, expected=0, then=completion())
    assert done.position == 3
    assert done.value is not None and done.value.iterations_used == 1
    assert done.value.usage == Usage(7, 3)
    assert [e.record for e in await store.journal.read("task:t1")] == records


async def test_a_combined_commit_whose_work_fails_writes_no_record(store: Store) -> None:
    await a_task(store)

    def refuses(tx: Transaction) -> None:
        statements.complete_iteration(tx, "t1", 1, Usage(7, 3), NOW)
        raise ValueError("refused after its change")

    with pytest.raises(ValueError, match="refused after"):
        await store.journal.commit("task:t1", [ANSWER], expected=0, then=refuses)
    assert await store.journal.read("task:t1") == []
    record = await store.tasks.read(partial(statements.get, task="t1"))
    assert record is not None and record.iterations_used == 0 and record.usage == Usage()


async def test_a_refused_append_runs_none_of_its_work(store: Store) -> None:
    await a_task(store)
    await store.journal.append("task:t1", [ANSWER], expected=0)
    with pytest.raises(ConcurrentAppend):
        await store.journal.commit("task:t1", [ANSWER], expected=0, then=completion())
    record = await store.tasks.read(partial(statements.get, task="t1"))
    assert record is not None and record.iterations_used == 0
    assert len(await store.journal.read("task:t1")) == 1


async def test_a_read_with_gives_what_the_fold_lacks_and_the_tasks_row_at_once(
    store: Store,
) -> None:
    await a_task(store)
    first = UserMessage("hi", "researcher", "t1#0")
    await store.journal.append("task:t1", [first, ANSWER], expected=0)
    found = await store.journal.read_with(
        "task:t1", after=1, then=partial(statements.get, task="t1")
    )
    assert [(e.seq, e.record) for e in found.entries] == [(2, ANSWER)]
    assert found.value is not None and found.value.id == "t1"


async def test_every_view_is_one_database_and_closing_a_view_closes_nothing(
    store: Store,
) -> None:
    assert store.journal_store.database is store.database
    assert store.tasks.database is store.database
    assert store.approvals.store is store.tasks
    await store.journal.close()  # a Store's journal is a view: the Store stays open
    await store.journal.append("s1", [UserMessage("hi", "a", "t1")], expected=0)
    assert store.shared is store.database.shared
