"""Stores for tests: a :class:`~ankka.runtime.store.open.Store` whose journal store closes it.

A Store's views close nothing (its opener closes it). Many tests hand a runtime its journal
store and let the runtime's ``aclose`` end it, as ``ankka serve`` ends its Store after the
runtime; :func:`journal_store` gives them that: the journal store of a Store opened for it,
closing the Store when it is closed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ankka.runtime.store.journal_store import JournalTables
from ankka.runtime.store.open import Store
from tests.support.postgres import fresh_database

__all__ = ["OwnedJournalStore", "journal_store", "store_url"]


class OwnedJournalStore(JournalTables):
    """A Store's journal store that closes the Store when it is closed."""

    def __init__(self, store: Store) -> None:
        super().__init__(store.database)
        self.store = store

    async def __aenter__(self) -> OwnedJournalStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.store.close()


async def journal_store(url: str | Path) -> OwnedJournalStore:
    """The journal store of a new Store at ``url`` (a path or a store URL), owning it."""
    return OwnedJournalStore(await Store.open(url))


def store_url(request: pytest.FixtureRequest, tmp_path: Path, name: str) -> str:
    """A new, empty store's URL of the kind ``request.param`` names (``sqlite`` or
    ``postgresql``; only the second starts PostgreSQL), for a fixture parametrized over both."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.sqlite3'}"
    return fresh_database(request.getfixturevalue("postgres_server"), name)
