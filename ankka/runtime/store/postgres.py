"""The journal store for many pods: PostgreSQL, through psycopg 3 (extra ``postgres``).

Same interface and test suite as the SQLite store. An append is one transaction that checks
the position the writer read (``expected``) under a per-session transaction lock, so two pods
can never write a turn on top of a history the other changed. :class:`PostgresSessionLock`
holds a session-level advisory lock for a whole turn, which makes "one request at a time per
session" hold across pods, not only within one process.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from ankka._kernel.errors import ConfigurationError, StoreError
from ankka.runtime.records.registry import StoredEvent
from ankka.runtime.store.journal_store import ConcurrentAppend

try:
    import psycopg
    from psycopg_pool import AsyncConnectionPool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigurationError(
        "the PostgreSQL store needs the 'postgres' extra: pip install 'ankka[postgres]'"
    ) from exc

__all__ = ["MIGRATION_LOCK", "PostgresSessionLock", "PostgresStore", "ENSURE_SCHEMA", "redacted"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ankka_events (
    session TEXT NOT NULL,
    seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (session, seq)
)
"""

# Advisory locks take a bigint; both the append lock and the turn lock hash the session id.
# Two namespaces keep a turn's lock from blocking its own append.
_APPEND_NS = 1
_TURN_NS = 2

# Every store's migration (this one's and the task store's) runs in a transaction holding
# this lock: runtimes started together on a fresh database would otherwise race their
# CREATE TABLE IF NOT EXISTS, and one fails (pg_type_typname_nsp_index) instead of waiting.
# The task store's own lock is (3, 0).
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


class PostgresStore:
    def __init__(self, pool: AsyncConnectionPool[Any], dsn: str) -> None:
        self._pool = pool
        self._where = redacted(dsn)
        # A turn holds a pooled connection for its session lock and needs a second one to
        # read and append: at most half the pool holds locks, so holders never starve the
        # reads they wait on (100 turns at once exhausted a pool of 20 and timed out).
        self._holders = asyncio.Semaphore(max(1, pool.max_size // 2))

    @classmethod
    async def open(cls, dsn: str, *, max_connections: int = 20) -> PostgresStore:
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            dsn, min_size=1, max_size=max_connections, open=False, kwargs={"autocommit": True}
        )
        try:
            await pool.open(wait=True, timeout=10)
            async with pool.connection() as conn, conn.transaction():
                await conn.execute(MIGRATION_LOCK)
                await conn.execute(ENSURE_SCHEMA)
                await conn.execute(_SCHEMA)
        except (psycopg.Error, TimeoutError) as exc:
            await pool.close()
            raise StoreError(
                f"cannot open the PostgreSQL session store at {redacted(dsn)}: "
                f"{type(exc).__name__}: {str(exc).strip() or 'no answer'}"
            ) from exc
        return cls(pool, dsn)

    async def __aenter__(self) -> PostgresStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def append(
        self, session: str, events: Sequence[tuple[str, str]], *, expected: int
    ) -> int:
        at = datetime.now(UTC)
        try:
            async with self._pool.connection() as conn, conn.transaction():
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_APPEND_NS, session)
                )
                cursor = await conn.execute(
                    "SELECT COALESCE(MAX(seq), 0) FROM ankka_events WHERE session = %s",
                    (session,),
                )
                row = await cursor.fetchone()
                last = int(row[0]) if row else 0
                if last != expected:
                    raise ConcurrentAppend(
                        f"session {session!r} was written by another writer (at {last}, "
                        f"expected {expected}); the turn was not written"
                    )
                async with conn.cursor() as cur:
                    await cur.executemany(
                        "INSERT INTO ankka_events (session, seq, kind, body, at) "
                        "VALUES (%s, %s, %s, %s, %s)",
                        [(session, last + i, k, b, at) for i, (k, b) in enumerate(events, 1)],
                    )
        except psycopg.errors.UniqueViolation as exc:
            raise ConcurrentAppend(f"session {session!r} was written by another writer") from exc
        except psycopg.Error as exc:
            raise StoreError(f"the session store {self._where} failed: {exc}") from exc
        return last + len(events)

    async def read(self, session: str, *, after: int = 0) -> list[StoredEvent]:
        try:
            async with self._pool.connection() as conn:
                cursor = await conn.execute(
                    "SELECT seq, kind, body, at FROM ankka_events "
                    "WHERE session = %s AND seq > %s ORDER BY seq",
                    (session, after),
                )
                rows = await cursor.fetchall()
        except psycopg.Error as exc:
            raise StoreError(f"the session store {self._where} failed: {exc}") from exc
        return [StoredEvent(int(r[0]), r[1], r[2], r[3]) for r in rows]

    async def sessions(self) -> list[str]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT session FROM ankka_events GROUP BY session ORDER BY MAX(at), session"
            )
            return [r[0] for r in await cursor.fetchall()]

    async def close(self) -> None:
        await self._pool.close()

    def session_lock(self) -> PostgresSessionLock:
        return PostgresSessionLock(self._pool, self._holders)


class PostgresSessionLock:
    """Holds a session's turn lock in PostgreSQL for the length of a turn (across pods).

    The lock is a session-level advisory lock on a pooled connection that stays checked out
    while the turn runs; waiting for it is waiting in line, never a refusal.
    """

    def __init__(self, pool: AsyncConnectionPool[Any], holders: asyncio.Semaphore) -> None:
        self._pool = pool
        self._holders = holders

    @asynccontextmanager
    async def hold(self, session: str) -> AsyncIterator[None]:
        async with self._holders, self._pool.connection() as conn:
            await conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (_TURN_NS, session))
            try:
                yield
            finally:
                await conn.execute(
                    "SELECT pg_advisory_unlock(%s, hashtext(%s))", (_TURN_NS, session)
                )
