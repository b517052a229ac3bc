"""Both journal stores list sessions by last activity (the console shows the most recent
first), on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest

from ankka.runtime.records import registry as events
from ankka.runtime.records.messages import UserMessage
from ankka.runtime.store.journal_store import JournalStore
from tests.support.stores import journal_store

pytestmark = pytest.mark.integration


async def _write(store: JournalStore, session: str, at: int) -> int:
    return await store.append(session, [events.encode(UserMessage("hi", "a", "t"))], expected=at)


async def _check(store: JournalStore) -> None:
    await _write(store, "b", 0)
    await _write(store, "a", 0)
    assert await store.sessions() == ["b", "a"]  # a was written last; not ["a", "b"] by id
    await _write(store, "b", 1)
    assert await store.sessions() == ["a", "b"]


async def test_sqlite_lists_sessions_by_last_activity(tmp_path: Path) -> None:
    store = await journal_store(tmp_path / "journal.sqlite3")
    try:
        await _check(store)
    finally:
        await store.close()


async def test_postgres_lists_sessions_by_last_activity(postgres_server: str) -> None:
    name = f"recency_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(postgres_server, autocommit=True) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"')
    store = await journal_store(postgres_server.rsplit("/", 1)[0] + f"/{name}")
    try:
        await _check(store)
    finally:
        await store.close()
