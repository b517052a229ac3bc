"""Both journal stores list sessions by last activity (the console shows the most recent
first), on SQLite and on a real PostgreSQL; and page a caller's readable ones by cursor, each
once, none of another creator's (issue 31, item 3)."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
import pytest

from ankka.runtime.declare.policy import SessionPolicy
from ankka.runtime.records import registry as events
from ankka.runtime.records.messages import UserMessage
from ankka.runtime.records.session import SessionOpened
from ankka.runtime.store.journal_store import JournalStore
from ankka.runtime.store.readable import Cursor, readers
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


async def _paged(store: JournalStore) -> None:
    opened = {"alice": SessionOpened("alice", "a"), "bob": SessionOpened("bob", "a")}
    for n in range(25):
        who = "alice" if n % 5 == 0 else "bob"
        await store.append(f"s{n:02}", [events.encode(opened[who])], expected=0)
    await _write(store, "legacy", 0)  # no opener record: anyone's, as the policy says
    # Most recent first; _check's a and b have no opener either (b written last of the two).
    alices = ["legacy", *(f"s{n:02}" for n in range(20, -1, -5)), "b", "a"]
    seen: list[str] = []
    after: Cursor | None = None
    for _ in range(20):
        page = await store.readable(readers(SessionPolicy(), "alice"), after=after, limit=2)
        seen += [name for _, name in page]
        if len(page) < 2:
            break
        after = page[-1]
    assert seen == alices
    every = await store.readable(readers(SessionPolicy(), "ankka://platform/op"), after=None,
                                 limit=100)  # fmt: skip
    assert len(every) == 28


async def test_sqlite_lists_sessions_by_last_activity(tmp_path: Path) -> None:
    store = await journal_store(tmp_path / "journal.sqlite3")
    try:
        await _check(store)
        await _paged(store)
    finally:
        await store.close()


async def test_postgres_lists_sessions_by_last_activity(postgres_server: str) -> None:
    name = f"recency_{uuid.uuid4().hex[:8]}"
    async with await psycopg.AsyncConnection.connect(postgres_server, autocommit=True) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"')
    store = await journal_store(postgres_server.rsplit("/", 1)[0] + f"/{name}")
    try:
        await _check(store)
        await _paged(store)
    finally:
        await store.close()
