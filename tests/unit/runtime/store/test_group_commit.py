"""The SQLite group writer: writes that wait together share one commit; one write's failure
undoes that write only; a transaction that fails answers every caller with a StoreError."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from ankka._kernel.errors import StoreError
from ankka.runtime.store.group_commit import GroupWriter
from ankka.runtime.store.journal_store import ConcurrentAppend
from ankka.runtime.store.sqlite import SqliteDatabase, open_writer
from tests.support.stores import journal_store

SCHEMA = ("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY)",)


async def writer_counting_commits(path: Path) -> tuple[GroupWriter, list[str]]:
    writer = await open_writer(path, SCHEMA, "test-writer", "test store")
    statements: list[str] = []

    def trace(sql: str) -> None:
        statements.append(sql)

    await writer.write(lambda db: db.set_trace_callback(trace))
    statements.clear()
    return writer, statements


def insert(key: str) -> Callable[[sqlite3.Connection], int]:
    return lambda db: db.execute("INSERT INTO t VALUES (?)", (key,)).rowcount


def committed(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT k FROM t")}


async def test_writes_queued_behind_a_commit_share_the_next_one(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    writer, statements = await writer_counting_commits(path)
    release = threading.Event()

    def first(db: sqlite3.Connection) -> None:
        release.wait(10)  # the writer's thread is busy while the others queue
        db.execute("INSERT INTO t VALUES ('first')")

    head = asyncio.ensure_future(writer.write(first))
    await asyncio.sleep(0)
    rest = [asyncio.ensure_future(writer.write(insert(f"k{n}"))) for n in range(31)]
    await asyncio.sleep(0)
    release.set()
    await head
    assert await asyncio.gather(*rest) == [1] * 31
    assert statements.count("COMMIT") == 2  # the first on its own, the 31 together
    assert committed(path) == {"first", *(f"k{n}" for n in range(31))}
    await writer.close()


async def test_a_failing_write_is_undone_alone(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    writer = await open_writer(path, SCHEMA, "test-writer", "test store")

    def broken(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO t VALUES ('half')")
        raise ValueError("refused half-way")

    outcomes = await asyncio.gather(
        writer.write(lambda db: db.execute("INSERT INTO t VALUES ('a')")),
        writer.write(broken),
        writer.write(lambda db: db.execute("INSERT INTO t VALUES ('a')")),  # a duplicate key
        writer.write(lambda db: db.execute("INSERT INTO t VALUES ('b')")),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], ValueError)
    assert isinstance(outcomes[2], StoreError) and "test store" in str(outcomes[2])
    assert committed(path) == {"a", "b"}
    await writer.close()


async def test_concurrent_appends_of_many_sessions_each_commit_at_their_position(
    tmp_path: Path,
) -> None:
    store = await journal_store(tmp_path / "j.sqlite3")
    sessions = [f"s{n}" for n in range(32)]
    first = await asyncio.gather(*(store.append(s, [("user", "{}")], expected=0) for s in sessions))
    assert first == [1] * 32
    database = store.store.database
    assert isinstance(database, SqliteDatabase)
    assert database.commits == 2  # the first alone; the 31 queued behind it, together
    again = await asyncio.gather(
        *(store.append(s, [("user", "{}"), ("user", "{}")], expected=1) for s in sessions),
        store.append("s0", [("user", "{}")], expected=1),  # behind the one above: refused
        return_exceptions=True,
    )
    assert again[:32] == [3] * 32
    assert isinstance(again[32], ConcurrentAppend)
    assert [len(await store.read(s)) for s in sessions] == [3] * 32
    await store.close()


async def test_a_closed_writer_answers_the_writes_it_had_first(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    writer = await open_writer(path, SCHEMA, "test-writer", "test store")
    pending = [asyncio.ensure_future(writer.write(insert(str(n)))) for n in range(5)]
    await asyncio.sleep(0)
    await writer.close()
    await asyncio.gather(*pending)
    assert committed(path) == {str(n) for n in range(5)}
    with pytest.raises(StoreError, match="closed"):
        await writer.write(lambda db: None)
