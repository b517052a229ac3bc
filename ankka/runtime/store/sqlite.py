"""The embedded store's database: one SQLite file in WAL mode, opened once.

Every write of the store (journal appends, task and approval rows) goes to one write
connection owned by one thread (:class:`~.group_commit.GroupWriter`), so the event loop never
blocks on disk and the file has one writer: writes that arrive while a commit is on its way to
disk are committed together, in one ``BEGIN IMMEDIATE`` transaction and one fsync, each in a
savepoint of its own. ``synchronous=FULL``: a turn is on disk before its reply is sent. Reads
have a connection and a thread of their own, so a reader never queues behind a commit (WAL
lets it read the last committed state meanwhile).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from ankka._kernel.errors import StoreError, StoreUnavailable
from ankka.runtime.records.registry import StoredEvent
from ankka.runtime.store.database import (
    AddedColumn,
    NoticeRelay,
    Row,
    SchemaStep,
    SharedSessionLock,
    Transaction,
)
from ankka.runtime.store.group_commit import GroupWriter
from ankka.runtime.store.journal_store import ConcurrentAppend

__all__ = ["JOURNAL_SCHEMA", "SqliteDatabase", "ThreadConnection", "connect", "open_writer"]

T = TypeVar("T")

JOURNAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    session TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (session, seq)
) WITHOUT ROWID;
"""

# "database is locked" / "busy": another process holds the file's write lock past the busy
# timeout. Waiting and asking again can succeed; a full disk or a corrupt file cannot.
_TRANSIENT = frozenset({"SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_BUSY_SNAPSHOT"})


def failure(path: Path, exc: sqlite3.Error, what: str = "store") -> StoreError:
    """The store's own error for a failed statement, naming the file: one a later attempt
    may pass (the file busy past the timeout) is :class:`StoreUnavailable`."""
    name = getattr(exc, "sqlite_errorname", "")
    kind = StoreUnavailable if name in _TRANSIENT else StoreError
    error = kind(f"the {what} {path} failed: {exc}")
    error.__cause__ = exc
    return error


class _Tx:
    """A transaction on a SQLite connection (the writer's or the reader's)."""

    __slots__ = ("_db",)

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        return list(self._db.execute(sql, tuple(params)).fetchall())

    def append(
        self, session: str, events: Sequence[tuple[str, str]], *, expected: int, at: datetime
    ) -> int:
        db = self._db
        row = db.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session = ?", (session,)
        ).fetchone()
        last = int(row[0])
        if last != expected:
            raise ConcurrentAppend(
                f"session {session!r} was written by another writer (at {last}, "
                f"expected {expected}); the turn was not written"
            )
        stamp = at.isoformat()
        db.executemany(
            "INSERT INTO events (session, seq, kind, body, at) VALUES (?, ?, ?, ?, ?)",
            [(session, last + i, kind, body, stamp) for i, (kind, body) in enumerate(events, 1)],
        )
        return last + len(events)

    def events(self, session: str, *, after: int = 0) -> list[StoredEvent]:
        rows = self._db.execute(
            "SELECT seq, kind, body, at FROM events WHERE session = ? AND seq > ? ORDER BY seq",
            (session, after),
        ).fetchall()
        return [StoredEvent(r[0], r[1], r[2], datetime.fromisoformat(r[3])) for r in rows]

    def sessions(self) -> list[str]:
        rows = self._db.execute(
            "SELECT session FROM events GROUP BY session ORDER BY MAX(at), session"
        )
        return [r[0] for r in rows]

    def journal_table(self) -> str:
        return "events"

    def json_text(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}')"

    def stamp(self) -> str:
        return "?"


class ThreadConnection:
    """One connection and the one thread that uses it (the store's reader)."""

    def __init__(self, db: sqlite3.Connection, pool: ThreadPoolExecutor) -> None:
        self.db = db
        self.pool = pool

    @classmethod
    async def open(cls, path: Path, schema: Sequence[SchemaStep], name: str) -> ThreadConnection:
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


class SqliteDatabase:
    """The file's one writer and one reader; every view of the store runs through them."""

    def __init__(self, path: Path, writer: GroupWriter, reader: ThreadConnection) -> None:
        self.path = path
        self._writer = writer
        self._reader = reader
        self._closed = False

    @classmethod
    async def open(cls, path: str | Path, schema: Sequence[SchemaStep]) -> SqliteDatabase:
        """Open (creating if needed) the file at ``path`` with every table of ``schema``; a
        clear StoreError if it cannot."""
        target = Path(path)
        writer = await open_writer(target, (JOURNAL_SCHEMA, *schema), "ankka-sqlite", "store")
        try:
            reader = await ThreadConnection.open(target, (), "ankka-sqlite-read")
        except BaseException:
            await writer.close()
            raise
        return cls(target, writer, reader)

    @property
    def shared(self) -> bool:
        return False

    @property
    def where(self) -> str:
        return str(self.path)

    @property
    def commits(self) -> int:
        """Transactions committed by the writer so far (writes share them)."""
        return self._writer.commits

    @property
    def queued(self) -> int:
        """Writes waiting for the writer (the next commit takes them all)."""
        return self._writer.queued

    async def write(self, work: Callable[[Transaction], T], *, serial: bool = True) -> T:
        # One writer at a time is SQLite's own rule (and this file has one), so ``serial``
        # changes nothing here.
        def run(db: sqlite3.Connection) -> T:
            return work(_Tx(db))

        return await self._writer.write(run)

    async def read(self, work: Callable[[Transaction], T]) -> T:
        def transaction(db: sqlite3.Connection) -> T:
            db.execute("BEGIN")  # one snapshot for every statement of ``work``
            try:
                value = work(_Tx(db))
            finally:
                db.execute("COMMIT")
            return value

        try:
            return await self._reader.run(transaction)
        except sqlite3.Error as exc:
            raise failure(self.path, exc) from exc

    def session_lock(self) -> SharedSessionLock | None:
        """None: no lock across processes. A second process on the same file is still safe:
        ``expected`` refuses a turn written on top of a history it did not see."""
        return None

    def notices(self) -> NoticeRelay | None:
        return None  # one process: its notifier reaches every subscriber already

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._reader.close()
        finally:
            await self._writer.close()


def connect(path: Path, schema: Sequence[SchemaStep]) -> sqlite3.Connection:
    """A connection in WAL mode, durable at each commit, with ``schema`` created."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_S
        )
        _into_wal(db)
        db.execute("PRAGMA synchronous=FULL")
        for statement in schema:
            if isinstance(statement, AddedColumn):
                _add_column(db, statement)
            else:
                db.execute(statement)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(
            f"cannot open the session store at {path}: {exc}. Pass --store with a path in a "
            "writable directory (for example --store sqlite:///tmp/ankka.sqlite3)"
        ) from exc
    return db


BUSY_TIMEOUT_S = 10.0


def _into_wal(db: sqlite3.Connection) -> None:
    """Put the file in WAL mode. Openers racing on a file still in rollback mode can each
    hold a shared lock while asking for the exclusive one the switch needs; SQLite then
    answers one of them "database is locked" at once, without waiting (the busy handler
    would deadlock). That opener tries again, until the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    pause = 0.005
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


def _add_column(db: sqlite3.Connection, added: AddedColumn) -> None:
    """Add the column unless the table has it; in a write transaction, so two processes
    opening one file at once add it once (the second waits, then finds it)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        columns = {str(r[1]) for r in db.execute(f"PRAGMA table_info({added.table})")}
        if added.column not in columns:
            db.execute(f"ALTER TABLE {added.table} ADD COLUMN {added.column} {added.definition}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


async def open_writer(
    path: Path, schema: Sequence[SchemaStep], thread: str, what: str
) -> GroupWriter:
    """A group-committing writer on a new connection to ``path`` (see :func:`connect`);
    ``what`` names the store in its errors."""
    connection = await ThreadConnection.open(path, schema, thread)

    def failed(exc: sqlite3.Error) -> Exception:
        return failure(path, exc, what)

    return GroupWriter(connection.db, connection.pool, failed)
