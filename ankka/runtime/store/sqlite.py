"""The embedded journal store: one SQLite file in WAL mode.

Appends go to one write connection owned by one thread (:class:`~.group_commit.GroupWriter`),
so the event loop never blocks on disk: appends of different sessions that arrive while a
commit is on its way to disk are committed together, in one transaction and one fsync, each
in a savepoint of its own. ``synchronous=FULL``: a turn is on disk before its reply is sent.
Reads have a connection and a thread of their own, so a reader never queues behind a commit
(WAL lets it read the last committed state meanwhile).
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
from ankka.runtime.records.registry import StoredEvent
from ankka.runtime.store.group_commit import GroupWriter
from ankka.runtime.store.journal_store import ConcurrentAppend, SharedSessionLock

__all__ = ["SqliteStore", "ThreadConnection", "connect", "open_connections", "open_writer"]

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


class ThreadConnection:
    """One connection and the one thread that uses it (a store's reader)."""

    def __init__(self, db: sqlite3.Connection, pool: ThreadPoolExecutor) -> None:
        self.db = db
        self.pool = pool

    @classmethod
    async def open(cls, path: Path, schema: Sequence[str], name: str) -> ThreadConnection:
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        try:
            db = await asyncio.get_running_loop().run_in_executor(pool, connect, path, schema)
        except BaseException:
            pool.shutdown(wait=False)
            raise
        return cls(db, pool)

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.pool, work, self.db)

    async def close(self) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(self.pool, self.db.close)
        finally:
            self.pool.shutdown(wait=True)


class SqliteStore:
    def __init__(
        self,
        path: Path,
        writer: GroupWriter,
        reader: ThreadConnection,
    ):
        self.path = path
        self._writer = writer
        self._reader = reader
        self._closed = False

    @classmethod
    async def open(cls, path: str | Path) -> SqliteStore:
        """Open (creating if needed) the store at ``path``; a clear StoreError if it cannot."""
        target = Path(path)
        writer, reader = await open_connections(target, (_SCHEMA,), "ankka-sqlite", "session store")
        return cls(target, writer, reader)

    async def __aenter__(self) -> SqliteStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return await self._reader.run(work)
        except sqlite3.Error as exc:
            raise StoreError(f"the session store {self.path} failed: {exc}") from exc

    async def append(
        self, session: str, events: Sequence[tuple[str, str]], *, expected: int
    ) -> int:
        at = datetime.now(UTC).isoformat()

        def work(db: sqlite3.Connection) -> int:
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
                [(session, last + i, kind, body, at) for i, (kind, body) in enumerate(events, 1)],
            )
            return last + len(events)

        # Appends of other sessions that finish meanwhile share this one's commit (and fsync).
        return await self._writer.write(work)

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
            return [
                r[0]
                for r in db.execute(
                    "SELECT session FROM events GROUP BY session ORDER BY MAX(at), session"
                )
            ]

        return await self._run(work)

    @property
    def commits(self) -> int:
        """Transactions committed by this store's writer so far (appends share them)."""
        return self._writer.commits

    def session_lock(self) -> SharedSessionLock | None:
        """None: no lock across processes. A second process on the same file is still safe:
        ``expected`` refuses a turn written on top of a history it did not see."""
        return None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._reader.close()
        finally:
            await self._writer.close()


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


async def open_writer(path: Path, schema: Sequence[str], thread: str, what: str) -> GroupWriter:
    """A group-committing writer on a new connection to ``path`` (see :func:`connect`);
    ``what`` names the store in its errors."""
    connection = await ThreadConnection.open(path, schema, thread)

    def failed(exc: Exception) -> Exception:
        error = StoreError(f"the {what} {path} failed: {exc}")
        error.__cause__ = exc
        return error

    return GroupWriter(connection.db, connection.pool, failed)


async def open_connections(
    path: Path, schema: Sequence[str], thread: str, what: str
) -> tuple[GroupWriter, ThreadConnection]:
    """A store's two connections to ``path``: the group-committing writer
    (:func:`open_writer`) and a reader of its own (thread ``<thread>-read``), so reads do not
    queue behind commits. The writer is closed again if the reader cannot be opened."""
    writer = await open_writer(path, schema, thread, what)
    try:
        reader = await ThreadConnection.open(path, schema, f"{thread}-read")
    except BaseException:
        await writer.close()
        raise
    return writer, reader
