"""The task store on the embedded SQLite file (the journal's file, tables of its own).

One connection owned by one thread, as the journal's store does; ``BEGIN IMMEDIATE`` makes
every write transaction the only writer, ``synchronous=FULL`` puts it on disk before the
caller hears of it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ankka._kernel.errors import StoreError
from ankka.runtime.journal.sqlite import connect
from ankka.runtime.tasks.store import SCHEMA, Transaction

__all__ = ["SqliteTaskStore"]


class _Tx:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self._db.execute(sql, tuple(params)).fetchall())


class SqliteTaskStore:
    def __init__(self, path: Path, db: sqlite3.Connection, pool: ThreadPoolExecutor) -> None:
        self.path = path
        self._db = db
        self._pool = pool
        self._closed = False

    @classmethod
    async def open(cls, path: str | Path) -> SqliteTaskStore:
        target = Path(path)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ankka-tasks")
        try:
            db = await asyncio.get_running_loop().run_in_executor(pool, connect, target, SCHEMA)
        except BaseException:
            pool.shutdown(wait=False)
            raise
        return cls(target, db, pool)

    @property
    def shared(self) -> bool:
        return False

    async def _run(self, work: Callable[[Transaction], Any], begin: str) -> Any:
        def transaction(db: sqlite3.Connection) -> Any:
            db.execute(begin)
            try:
                value = work(_Tx(db))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return value

        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._pool, transaction, self._db
            )
        except sqlite3.Error as exc:
            raise StoreError(f"the task store {self.path} failed: {exc}") from exc

    async def write(self, work: Callable[[Transaction], Any]) -> Any:
        return await self._run(work, "BEGIN IMMEDIATE")

    async def read(self, work: Callable[[Transaction], Any]) -> Any:
        return await self._run(work, "BEGIN")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, self._db.close)
        finally:
            self._pool.shutdown(wait=True)
