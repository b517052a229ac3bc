"""The task store on the embedded SQLite file (the journal's file, tables of its own).

Writes go to one connection owned by one thread, as the journal's store does: ``BEGIN
IMMEDIATE`` makes every write transaction the only writer, ``synchronous=FULL`` puts it on disk
before the caller hears of it. Reads have a connection and a thread of their own, so a reader
never queues behind a writer's fsync (WAL lets it read the last committed state meanwhile).
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


class _Connection:
    """One connection and the one thread that uses it."""

    def __init__(self, db: sqlite3.Connection, pool: ThreadPoolExecutor) -> None:
        self.db = db
        self.pool = pool

    @classmethod
    async def open(cls, path: Path, name: str) -> _Connection:
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        try:
            db = await asyncio.get_running_loop().run_in_executor(pool, connect, path, SCHEMA)
        except BaseException:
            pool.shutdown(wait=False)
            raise
        return cls(db, pool)

    async def close(self) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(self.pool, self.db.close)
        finally:
            self.pool.shutdown(wait=True)


class SqliteTaskStore:
    def __init__(self, path: Path, writer: _Connection, reader: _Connection) -> None:
        self.path = path
        self._writer = writer
        self._reader = reader
        self._closed = False

    @classmethod
    async def open(cls, path: str | Path) -> SqliteTaskStore:
        target = Path(path)
        writer = await _Connection.open(target, "ankka-tasks")
        try:
            reader = await _Connection.open(target, "ankka-tasks-read")
        except BaseException:
            await writer.close()
            raise
        return cls(target, writer, reader)

    @property
    def shared(self) -> bool:
        return False

    async def _run(
        self, connection: _Connection, work: Callable[[Transaction], Any], begin: str
    ) -> Any:
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
                connection.pool, transaction, connection.db
            )
        except sqlite3.Error as exc:
            raise StoreError(f"the task store {self.path} failed: {exc}") from exc

    async def write(self, work: Callable[[Transaction], Any], *, serial: bool = True) -> Any:
        # One writer at a time is SQLite's own rule, so ``serial`` changes nothing here.
        return await self._run(self._writer, work, "BEGIN IMMEDIATE")

    async def read(self, work: Callable[[Transaction], Any]) -> Any:
        return await self._run(self._reader, work, "BEGIN")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._reader.close()
        finally:
            await self._writer.close()
