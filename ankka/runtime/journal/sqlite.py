"""The embedded journal store: one SQLite file in WAL mode.

Every call runs on one dedicated thread that owns the connection, so the event loop never
blocks on disk and SQLite never sees two threads. ``synchronous=FULL``: a turn is on disk
before the reply is sent.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from ankka._kernel.errors import StoreError
from ankka.runtime.journal.events import StoredEvent
from ankka.runtime.journal.store import ConcurrentAppend, SharedSessionLock

__all__ = ["SqliteStore", "connect"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    session TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (session, seq)
) WITHOUT ROWID;
"""


class SqliteStore:
    def __init__(self, path: Path, connection: sqlite3.Connection, pool: ThreadPoolExecutor):
        self.path = path
        self._db = connection
        self._pool = pool
        self._closed = False

    @classmethod
    async def open(cls, path: str | Path) -> SqliteStore:
        """Open (creating if needed) the store at ``path``; a clear StoreError if it cannot."""
        target = Path(path)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ankka-sqlite")
        loop = asyncio.get_running_loop()
        try:
            connection = await loop.run_in_executor(pool, connect, target, (_SCHEMA,))
        except BaseException:
            pool.shutdown(wait=False)
            raise
        return cls(target, connection, pool)

    async def __aenter__(self) -> SqliteStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, work, self._db)
        except sqlite3.Error as exc:
            raise StoreError(f"the session store {self.path} failed: {exc}") from exc

    async def append(
        self, session: str, events: Sequence[tuple[str, str]], *, expected: int
    ) -> int:
        at = datetime.now(UTC).isoformat()

        def work(db: sqlite3.Connection) -> int:
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(
                    "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session = ?", (session,)
                ).fetchone()
                last = int(row[0])
                if last != expected:
                    raise ConcurrentAppend(
                        f"session {session!r} was written by another writer (at {last}, "
                        f"expected {expected}); the turn was not written"
                    )
                db.executemany(
                    "INSERT INTO events (session, seq, kind, body, at) VALUES (?, ?, ?, ?, ?)",
                    [
                        (session, last + i, kind, body, at)
                        for i, (kind, body) in enumerate(events, 1)
                    ],
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return last + len(events)

        return await self._run(work)

    async def read(self, session: str, *, after: int = 0) -> list[StoredEvent]:
        def work(db: sqlite3.Connection) -> list[StoredEvent]:
            rows = db.execute(
                "SELECT seq, kind, body, at FROM events WHERE session = ? AND seq > ? ORDER BY seq",
                (session, after),
            ).fetchall()
            return [StoredEvent(r[0], r[1], r[2], datetime.fromisoformat(r[3])) for r in rows]

        return await self._run(work)

    async def sessions(self) -> list[str]:
        def work(db: sqlite3.Connection) -> list[str]:
            return [r[0] for r in db.execute("SELECT DISTINCT session FROM events ORDER BY 1")]

        return await self._run(work)

    def session_lock(self) -> SharedSessionLock | None:
        """None: no lock across processes. A second process on the same file is still safe:
        ``expected`` refuses a turn written on top of a history it did not see."""
        return None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._run(lambda db: db.close())
        finally:
            self._pool.shutdown(wait=True)


def connect(path: Path, schema: Sequence[str]) -> sqlite3.Connection:
    """A connection in WAL mode, durable at each commit, with ``schema`` created; shared
    with the task store, which keeps its tables in the same file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA busy_timeout=10000")
        for statement in schema:
            db.execute(statement)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(
            f"cannot open the session store at {path}: {exc}. Pass --store with a path in a "
            "writable directory (for example --store sqlite:///tmp/ankka.sqlite3)"
        ) from exc
    return db
