"""The task store on the embedded SQLite file (the journal's file, tables of its own).

Writes go to one connection owned by one thread, as the journal's store does, and are
group-committed the same way (:class:`~ankka.runtime.store.group_commit.GroupWriter`): writes
of different tasks that arrive together share one ``BEGIN IMMEDIATE`` transaction, each in a
savepoint of its own, and ``synchronous=FULL`` puts it on disk before any caller hears of it.
Reads have a connection and a thread of their own, so a reader never queues behind a writer's
fsync (WAL lets it read the last committed state meanwhile).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ankka._kernel.errors import StoreError
from ankka.runtime.store.group_commit import GroupWriter
from ankka.runtime.store.sqlite import ThreadConnection, open_connections
from ankka.runtime.store.tasks import SCHEMA, Transaction

T = TypeVar("T")

__all__ = ["SqliteTaskStore"]


class _Tx:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self._db.execute(sql, tuple(params)).fetchall())


class SqliteTaskStore:
    def __init__(self, path: Path, writer: GroupWriter, reader: ThreadConnection) -> None:
        self.path = path
        self._writer = writer
        self._reader = reader
        self._closed = False

    @classmethod
    async def open(cls, path: str | Path) -> SqliteTaskStore:
        target = Path(path)
        writer, reader = await open_connections(target, SCHEMA, "ankka-tasks", "task store")
        return cls(target, writer, reader)

    @property
    def shared(self) -> bool:
        return False

    async def read(self, work: Callable[[Transaction], T]) -> T:
        def transaction(db: sqlite3.Connection) -> T:
            db.execute("BEGIN")
            try:
                value = work(_Tx(db))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return value

        try:
            return await self._reader.run(transaction)
        except sqlite3.Error as exc:
            raise StoreError(f"the task store {self.path} failed: {exc}") from exc

    async def write(self, work: Callable[[Transaction], T], *, serial: bool = True) -> T:
        # One writer at a time is SQLite's own rule, so ``serial`` changes nothing here.
        return await self._writer.write(lambda db: work(_Tx(db)))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._reader.close()
        finally:
            await self._writer.close()
