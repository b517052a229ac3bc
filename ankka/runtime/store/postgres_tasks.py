"""The task store on PostgreSQL, shared by every runtime process of an agent.

The statements are :mod:`.store`'s, run on psycopg's synchronous pool in worker threads so
that one body of SQL serves both stores. Every write transaction that may touch several
rows (creating a task, a cascade, a lease claim) first takes one transaction-scoped advisory
lock, so those are serialised across processes exactly as SQLite's ``BEGIN IMMEDIATE``
serialises them in one. A change of one task's row made while it is worked (``serial=False``)
takes only that row's lock, so the iterations of different instances commit side by side.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ankka._kernel.errors import ConfigurationError, StoreError
from ankka.runtime.store.postgres import ENSURE_SCHEMA, MIGRATION_LOCK, redacted
from ankka.runtime.store.tasks import SCHEMA, Transaction

try:
    import psycopg
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigurationError(
        "the PostgreSQL store needs the 'postgres' extra: pip install 'ankka[postgres]'"
    ) from exc

T = TypeVar("T")

__all__ = ["PostgresTaskStore"]

_TASKS_LOCK = 3  # advisory lock namespace; the journal uses 1 and 2


class _Tx:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self._conn.execute(sql.replace("?", "%s"), tuple(params))
        return list(cursor.fetchall()) if cursor.description is not None else []


class PostgresTaskStore:
    def __init__(self, pool: ConnectionPool[Any], threads: ThreadPoolExecutor, where: str):
        self._pool = pool
        self._threads = threads
        self._where = where

    @classmethod
    async def open(cls, dsn: str, *, connections: int = 8) -> PostgresTaskStore:
        where = redacted(dsn)
        threads = ThreadPoolExecutor(max_workers=connections, thread_name_prefix="ankka-pg-tasks")

        def connect() -> ConnectionPool[Any]:
            pool: ConnectionPool[Any] = ConnectionPool(
                dsn, min_size=1, max_size=connections, open=False, kwargs={"autocommit": True}
            )
            try:
                pool.open(wait=True, timeout=10)
                with pool.connection() as conn, conn.transaction():
                    conn.execute(MIGRATION_LOCK)
                    conn.execute(ENSURE_SCHEMA)
                    for statement in SCHEMA:
                        conn.execute(statement)
            except BaseException:
                pool.close()
                raise
            return pool

        try:
            pool = await asyncio.get_running_loop().run_in_executor(threads, connect)
        except (psycopg.Error, TimeoutError) as exc:
            threads.shutdown(wait=False)
            raise StoreError(
                f"cannot open the PostgreSQL task store at {where}: {type(exc).__name__}: "
                f"{str(exc).strip() or 'no answer'}"
            ) from exc
        return cls(pool, threads, where)

    @property
    def shared(self) -> bool:
        return True

    async def _run(self, work: Callable[[Transaction], T], *, lock: bool) -> T:
        def transaction() -> T:
            with self._pool.connection() as conn, conn.transaction():
                if lock:
                    conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_TASKS_LOCK,))
                return work(_Tx(conn))

        try:
            return await asyncio.get_running_loop().run_in_executor(self._threads, transaction)
        except psycopg.Error as exc:
            raise StoreError(f"the task store {self._where} failed: {exc}") from exc

    async def write(self, work: Callable[[Transaction], T], *, serial: bool = True) -> T:
        return await self._run(work, lock=serial)

    async def read(self, work: Callable[[Transaction], T]) -> T:
        return await self._run(work, lock=False)

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._threads, self._pool.close)
        finally:
            self._threads.shutdown(wait=True)
