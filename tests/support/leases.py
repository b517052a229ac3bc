"""The session lease rule as one scenario, run on SQLite
(tests/unit/runtime/store/test_session_leases.py) and on PostgreSQL
(tests/integration/test_compaction_postgres.py): taken when free, run out or already the
taker's; released only by its holder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ankka._kernel.clock import ManualClock
from ankka.runtime.store.session_leases import StoreLeases
from ankka.runtime.store.tasks import TaskStore

TTL = timedelta(seconds=30)


async def check_the_session_lease_rule(store: TaskStore) -> None:
    clock = ManualClock(datetime(2026, 12, 1, 8, 0, tzinfo=UTC))
    leases = StoreLeases(store, clock)
    await leases.create()
    assert await leases.acquire("s", "a", TTL)
    assert not await leases.acquire("s", "b", TTL)
    assert await leases.acquire("other", "b", TTL)  # one lease per session
    clock.advance(20)
    assert await leases.acquire("s", "a", TTL)  # renewed by its holder
    clock.advance(20)
    assert not await leases.acquire("s", "b", TTL)  # renewed: not run out yet
    await leases.release("s", "b")  # not b's: nothing changes
    assert not await leases.acquire("s", "b", TTL)
    clock.advance(11)
    assert await leases.acquire("s", "b", TTL)  # a's ran out
    await leases.release("s", "b")
    assert await leases.acquire("s", "a", TTL)  # released: free again
