"""The journal stores and the fold.

Store tests take the ``open_journal`` fixture, parametrized by store kind, so a new store (the
PostgreSQL one) runs this same suite by adding its opener to ``STORES``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import psycopg
import pytest

from ankka._kernel.errors import StoreError
from ankka.runtime.compaction.view import full_history
from ankka.runtime.journal import events
from ankka.runtime.journal.open import open_store
from ankka.runtime.journal.postgres import PostgresStore
from ankka.runtime.journal.sqlite import SqliteStore
from ankka.runtime.journal.store import ConcurrentAppend, JournalStore
from ankka.runtime.messages import (
    AssistantMessage,
    ModelCall,
    SummaryMessage,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)

TURN = (
    UserMessage("hi", "a", "t1"),
    AssistantMessage(
        None,
        (ToolCall("c1", "f", '{"x": 1}'),),
        "a",
        "t1",
        ModelCall("p", "m", "a", 1.5, Usage(3, 4, 1, 0)),
    ),
    ToolResult("c1", "f", "done", False, "a", "t1"),
    AssistantMessage(
        "bye", (), "a", "t1", ModelCall("p", "m", "a", 2.0, Usage(5, 6)), Usage(8, 10, 1)
    ),
)


OpenJournal = Callable[[], Awaitable[JournalStore]]


def _sqlite(tmp_path: Path) -> OpenJournal:
    async def open_it() -> JournalStore:
        return await SqliteStore.open(tmp_path / "j.sqlite3")

    return open_it


@pytest.fixture(params=["sqlite", "postgres"])
def open_journal(request: pytest.FixtureRequest, tmp_path: Path) -> OpenJournal:
    """Opens the same journal (same file or database) each time it is called."""
    if request.param == "sqlite":
        return _sqlite(tmp_path)
    dsn: str = request.getfixturevalue("postgres_server")
    database = f"journal_{uuid.uuid4().hex[:12]}"

    async def open_postgres() -> JournalStore:
        if not created:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                await conn.execute(f"CREATE DATABASE {database}")
            created.append(database)
        return await PostgresStore.open(dsn.rsplit("/", 1)[0] + f"/{database}")

    created: list[str] = []
    return open_postgres


def test_every_message_survives_its_encoding() -> None:
    for message in TURN:
        assert events.decode(*events.encode(message)) == message


async def test_appends_are_read_back_in_order_after_reopening(open_journal: OpenJournal) -> None:
    store = await open_journal()
    try:
        position = await store.append("s", [events.encode(m) for m in TURN], expected=0)
        assert position == 4
    finally:
        await store.close()
    store = await open_journal()
    try:
        stored = await store.read("s")
        assert [e.seq for e in stored] == [1, 2, 3, 4]
        assert full_history(stored) == list(TURN)
        assert [e.seq for e in await store.read("s", after=2)] == [3, 4]
        assert await store.read("other") == []
        assert await store.sessions() == ["s"]
    finally:
        await store.close()


async def test_an_append_on_a_stale_position_is_refused_and_writes_nothing(
    open_journal: OpenJournal,
) -> None:
    store = await open_journal()
    try:
        await store.append("s", [events.encode(TURN[0])], expected=0)
        with pytest.raises(ConcurrentAppend):
            await store.append("s", [events.encode(m) for m in TURN], expected=0)
        assert len(await store.read("s")) == 1
    finally:
        await store.close()


def test_a_summary_is_never_journaled_as_a_message() -> None:
    with pytest.raises(TypeError, match="HistoryCompacted"):
        events.encode(SummaryMessage("a summary", replaces=3))


async def test_an_unwritable_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match=r"cannot open the session store .*--store"):
        await open_store(f"sqlite:///{blocker}/sub/j.sqlite3")


async def test_an_unknown_store_scheme_is_named() -> None:
    with pytest.raises(Exception, match="unknown store scheme 'redis'"):
        await open_store("redis://localhost")


async def test_a_postgres_server_that_is_not_there_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match="cannot open the PostgreSQL session store") as error:
        await open_store("postgresql://ankka:hunter2@127.0.0.1:9/db")
    assert "hunter2" not in str(error.value)
