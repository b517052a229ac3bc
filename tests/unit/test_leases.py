"""The session lease of compaction over the task store on SQLite (the scenario, also run on
PostgreSQL, is in tests/support/leases.py; instances' leases: tests/unit/tasks)."""

from __future__ import annotations

from pathlib import Path

from ankka.runtime.store.session_leases import LocalLeases, open_leases
from ankka.runtime.store.sqlite_tasks import SqliteTaskStore
from tests.support.leases import check_the_session_lease_rule


async def test_a_session_lease_is_exclusive_until_it_runs_out(tmp_path: Path) -> None:
    store = await SqliteTaskStore.open(tmp_path / "store.sqlite3")
    try:
        await check_the_session_lease_rule(store)
    finally:
        await store.close()


async def test_one_process_on_sqlite_grants_every_lease(tmp_path: Path) -> None:
    store = await SqliteTaskStore.open(tmp_path / "store.sqlite3")
    try:
        assert not store.shared
        assert isinstance(await open_leases(store), LocalLeases)
    finally:
        await store.close()
