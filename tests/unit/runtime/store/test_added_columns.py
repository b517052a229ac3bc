"""Columns added to a side table after stores were written without them: a store written
before them opens, gains the columns (its rows taking their defaults), and keeps every row,
on SQLite and PostgreSQL alike; openers racing on one such store add it once."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ankka.runtime.records.messages import Usage
from ankka.runtime.store import remote_statements as remote
from ankka.runtime.store.database import Transaction
from ankka.runtime.store.open import Store

# ankka_remote_children as runtimes before its ``created`` and ``reported`` columns wrote it.
OLD_TABLE = (
    "CREATE TABLE ankka_remote_children "
    "(task TEXT PRIMARY KEY, peer TEXT NOT NULL, body TEXT NOT NULL)"
)
OLD_ROW = (
    "INSERT INTO ankka_remote_children (task, peer, body) VALUES ('r1:1.0', 'researcher', '{}')"
)


@pytest.fixture(params=["sqlite", "postgres"])
async def old_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The URL of a store holding a remote child written before the added columns."""
    if request.param == "sqlite":
        path = tmp_path / "old.sqlite3"
        with sqlite3.connect(path) as db:
            db.execute(OLD_TABLE)
            db.execute(OLD_ROW)
        db.close()
        yield str(path)
        return
    dsn: str = request.getfixturevalue("postgres_server")
    database = f"old_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {database}")
    url = dsn.rsplit("/", 1)[0] + f"/{database}"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(OLD_TABLE)
        await conn.execute(OLD_ROW)
    yield url


def rows(tx: Transaction) -> list[tuple[Any, ...]]:
    return tx.rows(
        "SELECT task, peer, body, created, reported FROM ankka_remote_children ORDER BY task"
    )


def made(task: str) -> Callable[[Transaction], None]:
    return lambda tx: remote.made(tx, task, iterations=2, usage=Usage(180, 14))


async def test_a_store_written_before_the_added_columns_gains_them_and_keeps_its_rows(
    old_store: str,
) -> None:
    async with await Store.open(old_store) as store:
        assert await store.tasks.read(rows) == [("r1:1.0", "researcher", "{}", 0, None)]
        await store.tasks.write(made("r1:1.0"))
        await store.tasks.write(
            lambda tx: remote.record(tx, "r1:1.1", "researcher", {"type": "summary"})
        )
    async with await Store.open(old_store) as again:  # the columns are there: nothing to add
        found = await again.tasks.read(rows)
    assert [r[:4] for r in found] == [
        ("r1:1.0", "researcher", "{}", 1),
        ("r1:1.1", "researcher", '{"type": "summary"}', 0),
    ]
    assert json.loads(found[0][4]) == {"iterations": 2, "usage": Usage(180, 14).as_dict()}
    assert found[1][4] is None


async def test_stores_opened_at_once_on_a_store_without_the_columns_add_them_once(
    old_store: str,
) -> None:
    results = await asyncio.gather(
        *(Store.open(old_store) for _ in range(4)), return_exceptions=True
    )
    opened = [r for r in results if isinstance(r, Store)]
    try:
        assert len(opened) == 4, [r for r in results if not isinstance(r, Store)]
        for store in opened:
            assert await store.tasks.read(rows) == [("r1:1.0", "researcher", "{}", 0, None)]
    finally:
        for store in opened:
            await store.close()


async def a_running_store(postgres_server: str) -> str:
    """The URL of a store a running process made (its columns and indexes there) with one
    remote child, on a database whose lock_timeout (5 s) fails an open that waits for a lock."""
    database = f"has_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(postgres_server, autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {database}")
        await conn.execute(f"ALTER DATABASE {database} SET lock_timeout = '5s'")
    url = postgres_server.rsplit("/", 1)[0] + f"/{database}"
    async with await Store.open(url) as store:
        await store.tasks.write(
            lambda tx: remote.record(tx, "r1:1.0", "researcher", {"type": "summary"})
        )
    return url


async def test_opening_a_store_that_has_the_columns_waits_for_no_reader_of_the_table(
    postgres_server: str,
) -> None:
    """A running process reading the table (a transaction holding its ACCESS SHARE lock)
    does not hold up another process opening the store: no ``ALTER TABLE`` is issued when
    the columns are there, so the opener asks for no lock on the table (an ``ALTER`` would
    wait for the reader, and the database's lock_timeout would fail the open)."""
    url = await a_running_store(postgres_server)
    async with await psycopg.AsyncConnection.connect(url) as reader:
        await reader.execute("SELECT task FROM ankka_remote_children")  # the reader's lock
        async with await Store.open(url) as again:
            found = await again.tasks.read(rows)
        await reader.rollback()
    assert found == [("r1:1.0", "researcher", '{"type": "summary"}', 0, None)]


async def test_opening_a_store_that_has_its_indexes_waits_for_no_writer_of_their_tables(
    postgres_server: str,
) -> None:
    """A running process writing a table (a transaction holding its ROW EXCLUSIVE lock) does
    not hold up another process opening the store: no ``CREATE INDEX`` is issued for an index
    that is there, so the opener asks for no SHARE lock on the table (one would wait for the
    writer, and the database's lock_timeout would fail the open; held with the locks of the
    steps before it, it could deadlock with a writer of two tables)."""
    url = await a_running_store(postgres_server)
    async with await psycopg.AsyncConnection.connect(url) as writer:
        for table in ("ankka_tasks", "ankka_instances", "ankka_approvals", "ankka_task_tree"):
            await writer.execute(f"LOCK TABLE {table} IN ROW EXCLUSIVE MODE")  # writing them
        async with await Store.open(url) as again:
            found = await again.tasks.read(rows)
        await writer.rollback()
    assert found == [("r1:1.0", "researcher", '{"type": "summary"}', 0, None)]
