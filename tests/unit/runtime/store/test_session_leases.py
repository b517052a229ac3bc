"""The session lease of compaction over the store on SQLite (the scenario, also run on
PostgreSQL, is in tests/support/leases.py; instances' leases:
tests/unit/runtime/store/test_tasks.py)."""

from __future__ import annotations

from pathlib import Path

from ankka.runtime.store.open import Store
from ankka.runtime.store.session_leases import LocalLeases, open_leases
from tests.support.leases import check_the_session_lease_rule


async def test_a_session_lease_is_exclusive_until_it_runs_out(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "store.sqlite3") as store:
        await check_the_session_lease_rule(store.tasks)


async def test_one_process_on_sqlite_grants_every_lease(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "store.sqlite3") as store:
        assert not store.shared
        assert isinstance(await open_leases(store.tasks), LocalLeases)
        assert isinstance(store.leases, LocalLeases)
