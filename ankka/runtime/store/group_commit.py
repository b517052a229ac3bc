"""Group commit on one SQLite connection: writes that arrive together share one fsync.

A :class:`GroupWriter` owns a write connection and the one thread that uses it. A write is a
function of the connection; :meth:`GroupWriter.write` queues it and waits. While the thread is
committing, new writes wait in the queue; when it is free, it takes every queued write, runs
each in a ``SAVEPOINT`` of one ``BEGIN IMMEDIATE`` transaction, and commits them all at once.
A write that raises is rolled back to its savepoint alone (the others still commit) and its
caller gets its exception. Every caller is answered only after the ``COMMIT`` that holds its
write returned, so durability is what it was with a transaction each (``synchronous=FULL``);
a lone write still commits at once, on its own.

No asyncio task is started: the executor's future for a batch is the writer's, and its done
callback answers the batch's callers and starts the next batch on the event loop's thread.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from ankka._kernel.errors import StoreError

__all__ = ["GroupWriter"]

T = TypeVar("T")

Write = Callable[[sqlite3.Connection], Any]


@dataclass(frozen=True, slots=True)
class _Outcome:
    value: Any = None
    error: BaseException | None = None


def commit_batch(db: sqlite3.Connection, writes: list[Write]) -> list[_Outcome]:
    """Run ``writes`` in one transaction, each in a savepoint of its own; commit. Pure of
    asyncio: runs on the writer's thread. Raises (nothing committed) when the transaction
    itself fails; a write's own failure undoes that write only."""
    outcomes: list[_Outcome] = []
    db.execute("BEGIN IMMEDIATE")
    try:
        for write in writes:
            db.execute("SAVEPOINT ankka_write")
            try:
                value = write(db)
            except Exception as exc:
                db.execute("ROLLBACK TO ankka_write")
                db.execute("RELEASE ankka_write")
                outcomes.append(_Outcome(error=exc))
                continue
            db.execute("RELEASE ankka_write")
            outcomes.append(_Outcome(value=value))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return outcomes


class GroupWriter:
    def __init__(
        self,
        db: sqlite3.Connection,
        pool: ThreadPoolExecutor,
        failed: Callable[[sqlite3.Error], Exception],
    ) -> None:
        self._db = db
        self._pool = pool
        self._failed = failed  # turns a sqlite3.Error into the store's own StoreError
        self._queue: list[tuple[Write, asyncio.Future[Any]]] = []
        self._busy = False
        self._idle: asyncio.Event | None = None
        self._closed = False
        self.commits = 0  # batches committed: writes ÷ commits is how well they grouped

    @property
    def queued(self) -> int:
        """Writes waiting for the thread: the next commit takes them all."""
        return len(self._queue)

    async def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in a transaction that is committed before this returns."""
        if self._closed:
            raise StoreError("the store was closed; the write was not made")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.append((work, future))
        if not self._busy:
            self._start(loop)
        return await future

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        batch, self._queue = self._queue, []
        self._busy = True
        done = loop.run_in_executor(self._pool, commit_batch, self._db, [work for work, _ in batch])
        done.add_done_callback(partial(self._answer, loop, batch))

    def _answer(
        self,
        loop: asyncio.AbstractEventLoop,
        batch: list[tuple[Write, asyncio.Future[Any]]],
        done: asyncio.Future[list[_Outcome]],
    ) -> None:
        self._busy = False
        error = None if done.cancelled() else done.exception()
        self.commits += error is None and not done.cancelled()
        for index, (_, future) in enumerate(batch):
            if future.done():
                continue  # its caller was cancelled; the write committed all the same
            if done.cancelled():
                future.cancel()
            elif error is not None:
                future.set_exception(self._wrap(error))
            else:
                outcome = done.result()[index]
                if outcome.error is not None:
                    future.set_exception(self._wrap(outcome.error))
                else:
                    future.set_result(outcome.value)
        if self._queue:
            self._start(loop)
        elif self._idle is not None:
            self._idle.set()

    def _wrap(self, error: BaseException) -> BaseException:
        if isinstance(error, sqlite3.Error):
            wrapped = self._failed(error)
            wrapped.__cause__ = error
            return wrapped
        return error

    async def close(self) -> None:
        """Wait for the writes in flight, then close the connection and stop the thread."""
        self._closed = True
        try:
            while self._busy or self._queue:
                self._idle = asyncio.Event()
                await self._idle.wait()
            await asyncio.get_running_loop().run_in_executor(self._pool, self._db.close)
        finally:
            self._pool.shutdown(wait=True)
