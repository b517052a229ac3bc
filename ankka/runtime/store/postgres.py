"""The store's database for many pods: PostgreSQL, through psycopg 3 (extra ``postgres``).

One concurrency model: psycopg's synchronous pool, each transaction run on a worker thread
that holds one pooled connection for it, the event loop awaiting the thread. Not psycopg's
async connections: the store's statements are one body of SQL for both databases, plain
functions of a :class:`~.database.Transaction`, and SQLite's driver is synchronous (the stdlib
module on its own thread), so an async model here would need each statement written twice, and
a journal append could no longer share a transaction with a task's row. The hop to a thread
costs tens of microseconds against a commit's milliseconds (docs/benchmarks.md).

- An append is one transaction that checks the position the writer read (``expected``) under
  a per-session transaction lock, so two pods never write a turn on top of a history the
  other changed. A write that may change many rows (``serial``) first takes one
  transaction-scoped advisory lock, serialising such writers across processes as SQLite's
  ``BEGIN IMMEDIATE`` does in one.
- :class:`PostgresSessionLock` holds a session-level advisory lock for a whole turn, on a
  pooled connection kept out of the pool meanwhile, which makes "one request at a time per
  session" hold across pods. Its release never replaces the turn's answer: a release that
  fails (the server restarted, the connection broke) is logged and its connection closed,
  which ends the lock in the server.
- Failures are the store's own: a server that cannot be reached is :class:`StoreUnavailable`
  (503, retry later: nothing was written), a connection that broke during a commit
  :class:`StoreOutcomeUnknown`; a pooled connection found dead before its transaction began is
  replaced and the transaction made once more, so a restarted server costs its callers at most
  the requests that were in flight.
- Its notices between processes (LISTEN/NOTIFY) are :mod:`.postgres_notices`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from functools import lru_cache, partial
from typing import Any, Literal, TypeVar

from ankka._kernel.errors import (
    ConfigurationError,
    StoreError,
    StoreOutcomeUnknown,
    StoreUnavailable,
)
from ankka.runtime.records.registry import StoredEvent
from ankka.runtime.store.database import AddedColumn, Row, SchemaStep, Transaction
from ankka.runtime.store.journal_store import ConcurrentAppend

try:
    import psycopg
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigurationError(
        "the PostgreSQL store needs the 'postgres' extra: pip install 'ankka[postgres]'"
    ) from exc

from ankka.runtime.store.postgres_notices import PostgresNotices

__all__ = [
    "ENSURE_SCHEMA",
    "MIGRATION_LOCK",
    "PostgresDatabase",
    "PostgresSessionLock",
    "redacted",
]

log = logging.getLogger("ankka.store")

T = TypeVar("T")

JOURNAL_SCHEMA = """CREATE TABLE IF NOT EXISTS ankka_events (
    session TEXT NOT NULL,
    seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session, seq)
)"""

# Advisory locks take a bigint; the append lock and the turn lock hash the session id. Their
# namespaces keep a turn's lock from blocking its own append; the task tables' serial writers
# take the third, the schema's creation at start the fourth (MIGRATION_LOCK).
_APPEND_NS = 1
_TURN_NS = 2
_TASKS_LOCK = 3

Phase = Literal["connect", "work", "commit"]

# The store's migration (every table of the one database) runs in a transaction holding this
# lock: runtimes started together on a fresh database would otherwise race their CREATE TABLE
# IF NOT EXISTS, and one fails (pg_type_typname_nsp_index) instead of waiting.
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(4, 0)"
# The schema the connection's search_path names first (the operator renders one per Agent,
# through PGOPTIONS), created when it does not exist yet; tables are then created in it.
ENSURE_SCHEMA = """
DO $$
DECLARE wanted text := btrim(split_part(current_setting('search_path'), ',', 1), ' "');
BEGIN
    IF current_schema() IS NULL AND wanted <> '' AND wanted <> '$user' THEN
        EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', wanted);
    END IF;
END $$
"""


def redacted(dsn: str) -> str:
    """The DSN without its password, for error messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparseable DSN>"
    info.pop("password", None)
    if not info:  # postgresql:// alone: libpq reads PGHOST, PGUSER ... (the operator's parts)
        host, database = os.environ.get("PGHOST", "unset"), os.environ.get("PGDATABASE", "unset")
        return f"postgresql:// (PGHOST={host} PGDATABASE={database})"
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})


# Whether the schema the tables are in (search_path's first) has the column already.
HAS_COLUMN = (
    "SELECT 1 FROM information_schema.columns "
    "WHERE table_schema = current_schema() AND table_name = %s AND column_name = %s"
)


# Whether that schema has the index already, and the index a schema step creates.
HAS_INDEX = "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = %s"
_CREATES_INDEX = re.compile(r"\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+IF\s+NOT\s+EXISTS\s+(\w+)\s", re.I)


def _migrate(conn: psycopg.Connection[Any], step: SchemaStep) -> None:
    """Take one schema step. An added column is looked up first: ``ALTER TABLE`` takes an
    ACCESS EXCLUSIVE lock on the table even when the column is there, held until the
    migration commits, so every open would queue behind running processes' reads and writes
    of it and then hold them up. So is an index: ``CREATE INDEX IF NOT EXISTS`` takes a SHARE
    lock on its table before it finds the index there, which waits for every running writer
    of the table, and, held until commit with the locks of the steps before it, can deadlock
    with a writer of two tables (a runtime starting beside working ones failed to open with
    DeadlockDetected). ``IF NOT EXISTS`` stays for two openers racing."""
    if not isinstance(step, AddedColumn):
        index = _CREATES_INDEX.match(step)
        if index is not None and conn.execute(HAS_INDEX, (index[1],)).fetchone() is not None:
            return
        conn.execute(step)
        return
    if conn.execute(HAS_COLUMN, (step.table, step.column)).fetchone() is None:
        conn.execute(
            f"ALTER TABLE {step.table} ADD COLUMN IF NOT EXISTS {step.column} {step.definition}"
        )


@lru_cache(maxsize=1024)
def _placeholders(sql: str) -> str:
    return sql.replace("?", "%s")


class _Tx:
    """A transaction (or, for reads, a run of autocommitted statements) on one connection."""

    __slots__ = ("_conn",)

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        cursor = self._conn.execute(_placeholders(sql), tuple(params))
        return list(cursor.fetchall()) if cursor.description is not None else []

    def append(
        self, session: str, events: Sequence[tuple[str, str]], *, expected: int, at: datetime
    ) -> int:
        conn = self._conn
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_APPEND_NS, session))
        row = conn.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM ankka_events WHERE session = %s", (session,)
        ).fetchone()
        last = int(row[0]) if row else 0
        if last != expected:
            raise ConcurrentAppend(
                f"session {session!r} was written by another writer (at {last}, "
                f"expected {expected}); the turn was not written"
            )
        try:
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO ankka_events (session, seq, kind, body, at) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    [(session, last + i, k, b, at) for i, (k, b) in enumerate(events, 1)],
                )
        except psycopg.errors.UniqueViolation as exc:
            raise ConcurrentAppend(f"session {session!r} was written by another writer") from exc
        return last + len(events)

    def events(self, session: str, *, after: int = 0) -> list[StoredEvent]:
        rows = self._conn.execute(
            "SELECT seq, kind, body, at FROM ankka_events "
            "WHERE session = %s AND seq > %s ORDER BY seq",
            (session, after),
        ).fetchall()
        return [StoredEvent(int(r[0]), r[1], r[2], r[3]) for r in rows]

    def sessions(self) -> list[str]:
        rows = self._conn.execute(
            "SELECT session FROM ankka_events GROUP BY session ORDER BY MAX(at), session"
        )
        return [r[0] for r in rows.fetchall()]

    def journal_table(self) -> str:
        return "ankka_events"

    def json_text(self, column: str, key: str) -> str:
        return f"(({column})::json ->> '{key}')"

    def stamp(self) -> str:
        return "CAST(? AS TIMESTAMPTZ)"


class _Failed(Exception):
    """A psycopg failure and how far its transaction had got (on the worker thread)."""

    def __init__(self, phase: Phase, error: psycopg.Error) -> None:
        super().__init__(str(error))
        self.phase = phase
        self.error = error


class PostgresDatabase:
    """One pool, its worker threads and its lock holders' threads; every view runs here."""

    def __init__(
        self,
        dsn: str,
        pool: ConnectionPool[Any],
        workers: ThreadPoolExecutor,
        lockers: ThreadPoolExecutor,
        holders: int,
    ) -> None:
        self._dsn = dsn
        self._pool = pool
        self._workers = workers
        self._lockers = lockers
        self._where = redacted(dsn)
        # A turn holds a pooled connection for its session lock and needs others to read and
        # append: the pool has room for every holder and every worker thread at once, so
        # holders never starve the work they wait on.
        self._holders = asyncio.Semaphore(holders)
        self._checking = False
        self._notices: PostgresNotices | None = None
        self._closed = False

    @classmethod
    async def open(
        cls, dsn: str, schema: Sequence[SchemaStep], *, workers: int = 8, holders: int = 16
    ) -> PostgresDatabase:
        """Open the pool (its first connection within 10 s) and create every table of
        ``schema`` that is missing; a clear StoreError if it cannot."""
        pool: ConnectionPool[Any] = ConnectionPool(
            dsn,
            min_size=2,
            max_size=workers + holders,
            open=False,
            # A worker never waits for a connection (the pool has one for each worker and
            # each lock holder), so a wait this long is an outage: answered as one.
            timeout=5,
            kwargs={"autocommit": True},
        )
        threads = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ankka-pg")
        lockers = ThreadPoolExecutor(max_workers=holders, thread_name_prefix="ankka-pg-lock")

        def prepare() -> None:
            pool.open(wait=True, timeout=10)
            with pool.connection() as conn, conn.transaction():
                # Processes starting together would race on CREATE ... IF NOT EXISTS.
                conn.execute(MIGRATION_LOCK)
                conn.execute(ENSURE_SCHEMA)
                for step in (JOURNAL_SCHEMA, *schema):
                    _migrate(conn, step)

        try:
            await asyncio.get_running_loop().run_in_executor(threads, prepare)
        except (psycopg.Error, TimeoutError, PoolTimeout) as exc:
            await asyncio.get_running_loop().run_in_executor(threads, pool.close)
            threads.shutdown(wait=False)
            lockers.shutdown(wait=False)
            raise StoreError(
                f"cannot open the PostgreSQL session store at {redacted(dsn)}: "
                f"{type(exc).__name__}: {str(exc).strip() or 'no answer'}"
            ) from exc
        return cls(dsn, pool, threads, lockers, holders)

    @property
    def shared(self) -> bool:
        return True

    @property
    def where(self) -> str:
        return self._where

    # --- transactions ------------------------------------------------------------------------

    async def write(self, work: Callable[[Transaction], T], *, serial: bool = True) -> T:
        return await self._run(partial(self._transaction, work, serial), writes=True)

    async def read(self, work: Callable[[Transaction], T]) -> T:
        return await self._run(partial(self._statements, work), writes=False)

    def _transaction(self, work: Callable[[Transaction], T], serial: bool) -> T:
        phase: Phase = "connect"
        try:
            with self._pool.connection() as conn:
                with conn.transaction():
                    phase = "work"
                    if serial:
                        conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_TASKS_LOCK,))
                    value = work(_Tx(conn))
                    phase = "commit"
                return value
        except psycopg.Error as exc:
            raise _Failed(phase, exc) from exc

    def _statements(self, work: Callable[[Transaction], T]) -> T:
        # Reads run autocommitted, a statement each: under READ COMMITTED a transaction would
        # give them no common snapshot either, only two round trips more.
        phase: Phase = "connect"
        try:
            with self._pool.connection() as conn:
                phase = "work"
                return work(_Tx(conn))
        except psycopg.Error as exc:
            raise _Failed(phase, exc) from exc

    async def _run(self, call: Callable[[], T], *, writes: bool) -> T:
        loop = asyncio.get_running_loop()
        for attempt in (1, 2):
            try:
                return await loop.run_in_executor(self._workers, call)
            except _Failed as failed:
                error = failed.error
                if isinstance(error, psycopg.OperationalError):
                    self._check_pool()
                    # A pooled connection that died idle (a restarted server) fails before a
                    # write's transaction began, or anywhere in a read: nothing was written,
                    # so it is asked again, once, on another connection.
                    again = failed.phase == "connect" or (not writes and failed.phase == "work")
                    if again and attempt == 1 and not isinstance(error, PoolTimeout):
                        continue
                raise self._translated(failed, writes=writes) from error
        raise AssertionError("unreachable")  # pragma: no cover

    def _translated(self, failed: _Failed, *, writes: bool) -> StoreError:
        error, where = failed.error, self._where
        detail = f"{type(error).__name__}: {str(error).strip() or 'no answer'}"
        if not isinstance(error, psycopg.OperationalError):
            return StoreError(f"the store {where} failed: {detail}")
        if writes and failed.phase == "commit":
            return StoreOutcomeUnknown(
                f"the connection to the store {where} broke while committing ({detail}): "
                "it may or may not have been written; read it before sending it again"
            )
        return StoreUnavailable(
            f"the store {where} cannot be reached ({detail}); nothing was written, try again"
        )

    def _check_pool(self) -> None:
        """After a connection failed, check the idle ones (a restarted server leaves each of
        them dead), once at a time, off the event loop."""
        if self._checking or self._closed:
            return
        self._checking = True

        def check() -> None:
            try:
                self._pool.check()
            finally:
                self._checking = False

        self._workers.submit(check)

    # --- the turn lock -----------------------------------------------------------------------

    def session_lock(self) -> PostgresSessionLock:
        return PostgresSessionLock(self)

    @asynccontextmanager
    async def hold(self, session: str) -> AsyncIterator[None]:
        """Hold ``session``'s turn lock (see :class:`PostgresSessionLock`)."""
        async with self._holders:
            conn = await self._take(session)
            try:
                yield
            finally:
                # Shielded: a cancelled turn still gives its lock back; never raises.
                await asyncio.shield(
                    asyncio.wrap_future(self._lockers.submit(self._give_back, conn, session))
                )

    async def _take(self, session: str) -> psycopg.Connection[Any]:
        taking: list[psycopg.Connection[Any]] = []
        future = self._lockers.submit(self._lock, session, taking)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            # The thread may be waiting for the lock: cancel its query, and give back what
            # it took should it have got the lock meanwhile.
            if taking:
                taking[0].cancel_safe()
            future.add_done_callback(partial(self._taken_too_late, session))
            raise
        except _Failed as failed:
            raise self._translated(failed, writes=False) from failed.error

    def _lock(self, session: str, taking: list[psycopg.Connection[Any]]) -> psycopg.Connection[Any]:
        for attempt in (1, 2):
            try:
                conn: psycopg.Connection[Any] = self._pool.getconn()
            except psycopg.Error as exc:
                raise _Failed("connect", exc) from exc
            taking[:] = [conn]
            try:
                conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (_TURN_NS, session))
            except psycopg.OperationalError as exc:
                self._pool.putconn(conn)  # broken: the pool discards it
                self._check_pool()
                if attempt == 1 and not isinstance(exc, psycopg.errors.QueryCanceled):
                    continue  # a connection that died idle holds no lock: take another
                raise _Failed("work", exc) from exc
            except BaseException as exc:
                self._pool.putconn(conn)
                if isinstance(exc, psycopg.Error):
                    raise _Failed("work", exc) from exc
                raise
            return conn
        raise AssertionError("unreachable")  # pragma: no cover

    def _taken_too_late(self, session: str, future: Future[psycopg.Connection[Any]]) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        with contextlib.suppress(RuntimeError):  # shutting down: closing the pool ends it
            self._lockers.submit(self._give_back, future.result(), session)

    def _give_back(self, conn: psycopg.Connection[Any], session: str) -> None:
        """Release the turn lock and return its connection. What has been committed is the
        turn's answer, so a failure here is logged, never raised: the connection is closed
        instead, and the server ends a closed session's locks."""
        try:
            conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_TURN_NS, session))
        except Exception as exc:
            log.warning(
                "the turn lock of session %r was not released (%s: %s); its connection is "
                "closed instead, which ends the lock",
                session,
                type(exc).__name__,
                str(exc).strip() or "no answer",
            )
            conn.close()
        try:
            self._pool.putconn(conn)
        except Exception as exc:  # a pool closing under it: the connection goes with it
            log.warning("a turn lock's connection was not returned to the pool: %s", exc)

    # --- notices -----------------------------------------------------------------------------

    def notices(self) -> PostgresNotices:
        if self._notices is None:
            self._notices = PostgresNotices(self._dsn, self._pool, self._workers)
        return self._notices

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            if self._notices is not None:
                await self._notices.close()
            await loop.run_in_executor(self._workers, self._pool.close)
        finally:
            self._workers.shutdown(wait=True)
            self._lockers.shutdown(wait=True)


class PostgresSessionLock:
    """Holds a session's turn lock in PostgreSQL for the length of a turn (across pods).

    The lock is a session-level advisory lock on a pooled connection that stays checked out
    while the turn runs; waiting for it is waiting in line, never a refusal. Releasing it never
    fails the turn (see :meth:`PostgresDatabase.hold`).
    """

    def __init__(self, database: PostgresDatabase) -> None:
        self._database = database

    def hold(self, session: str) -> AbstractAsyncContextManager[None]:
        return self._database.hold(session)
