"""Who compacts a session: a lease, so exactly one process summarises it at a time.

In one process (the SQLite store) the consumer's own bookkeeping already runs one compaction
per session, and :class:`LocalLeases` grants every lease. On PostgreSQL, where several pods
serve the same sessions, :class:`StoreLeases` takes the session's lease in the store (table
``ankka_session_leases``, through the store's one database, as the task tables' writes), by the one
lease rule of :mod:`ankka.runtime.store.leases` the task instances' owners follow too: taking it
succeeds when there is none, when it ran out, or when the taker already holds it; it runs out
by itself, so a pod that died mid-compaction never blocks a session for longer than the lease.

A lease saves a second summariser call; it is not what keeps the journal consistent. The
write of a compaction record checks, under the session's turn lock, that no other compaction
landed since the cut was made.
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Protocol

from ankka._kernel.clock import Clock, SystemClock
from ankka.runtime.store import leases
from ankka.runtime.store.database import Transaction
from ankka.runtime.store.tasks import TaskStore

__all__ = ["CompactionLeases", "LocalLeases", "StoreLeases", "open_leases"]


class CompactionLeases(Protocol):
    async def acquire(self, session: str, holder: str, ttl: timedelta) -> bool:
        """Take (or renew) the lease on ``session`` for ``ttl``; ``False`` if another holds
        it."""
        ...

    async def release(self, session: str, holder: str) -> None: ...

    async def close(self) -> None: ...


class LocalLeases:
    """Every lease granted: one process, whose consumer already runs one per session."""

    async def acquire(self, session: str, holder: str, ttl: timedelta) -> bool:
        return True

    async def release(self, session: str, holder: str) -> None:
        return None

    async def close(self) -> None:
        return None


class StoreLeases:
    """Session leases in the task store (which its opener owns and closes)."""

    def __init__(self, store: TaskStore, clock: Clock | None = None) -> None:
        self._store = store
        self._clock = clock or SystemClock()

    async def create(self) -> None:
        def work(tx: Transaction) -> None:
            tx.rows(leases.SESSION_SCHEMA)

        await self._store.write(work)

    async def acquire(self, session: str, holder: str, ttl: timedelta) -> bool:
        now = self._clock.now().timestamp()
        until = now + ttl.total_seconds()
        take = partial(leases.take_session, session=session, owner=holder, until=until, now=now)
        return bool(await self._store.write(take, serial=False))

    async def release(self, session: str, holder: str) -> None:
        drop = partial(leases.drop_session, session=session, owner=holder)
        await self._store.write(drop, serial=False)

    async def close(self) -> None:
        return None  # the store is its opener's


async def open_leases(store: TaskStore, clock: Clock | None = None) -> CompactionLeases:
    """The compaction leases that go with the task store: in it when other processes share
    it (PostgreSQL), else every lease granted."""
    if not store.shared:
        return LocalLeases()
    found = StoreLeases(store, clock)
    await found.create()
    return found
