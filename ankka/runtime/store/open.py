"""The store a URL names (``--store``), opened once: :class:`Store`.

``sqlite:///path`` (or a plain file path) for the embedded store; ``postgresql://...`` for the
store shared by many pods (needs the ``postgres`` extra; imported only when asked for). Either
is one database (:mod:`.database`), opened once, whose tables are the views a runtime uses::

    async with await Store.open("sqlite:///ankka.sqlite3") as store:
        store.journal       # session memory: typed records (Journal)
        store.journal_store # the same, as (kind, body) pairs (what Context/Runtime take)
        store.tasks         # the task tables (TaskStore: typed reads and writes)
        store.approvals     # the approval index (ApprovalIndex)
        store.leases        # compaction's session leases (CompactionLeases)

On SQLite that is one file with one writer (a thread, group-committing) and one reader; on
PostgreSQL one pool. The views close nothing: the Store's opener closes it, once.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.store.approval_index import SCHEMA as APPROVALS_SCHEMA
from ankka.runtime.store.approval_index import ApprovalIndex
from ankka.runtime.store.database import Database
from ankka.runtime.store.journal import Journal
from ankka.runtime.store.journal_store import JournalTables
from ankka.runtime.store.leases import SESSION_SCHEMA
from ankka.runtime.store.session_leases import CompactionLeases, LocalLeases, StoreLeases
from ankka.runtime.store.sqlite import SqliteDatabase
from ankka.runtime.store.tasks import SCHEMA as TASKS_SCHEMA
from ankka.runtime.store.tasks import TaskTables

if TYPE_CHECKING:
    from ankka._kernel.clock import Clock

__all__ = ["DEFAULT_STORE", "Store", "open_store", "sqlite_path"]

DEFAULT_STORE = "sqlite:///ankka.sqlite3"

# Every table of the store but the journal's (whose name and types are each database's own),
# created when missing each time a store is opened; a store written before a table or index
# existed gains it then, with nothing else to migrate.
_SIDE_TABLES = (*TASKS_SCHEMA, *APPROVALS_SCHEMA)


def sqlite_path(url: str) -> str | None:
    """The SQLite file a store URL names, or None for a PostgreSQL URL; a clear error for
    anything else."""
    if url.startswith(("postgresql://", "postgres://")):
        return None
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://")
        # sqlite:///relative.db and sqlite:////abs/path.db, as SQLAlchemy spells them
        path = path[1:] if path.startswith("/") else path
        if not path:
            raise ConfigurationError(f"the store URL {url!r} names no file")
        return path
    if "://" in url:
        scheme = url.split("://", 1)[0]
        raise ConfigurationError(
            f"unknown store scheme {scheme!r}; use sqlite:///PATH (or a plain path) or "
            "postgresql://USER@HOST/DB"
        )
    return url


class Store:
    """One database and its views. An async context manager; :meth:`close` is idempotent."""

    def __init__(self, database: Database, *, clock: Clock | None = None) -> None:
        self.database = database
        self.journal_store = JournalTables(database)
        self.journal = Journal(self.journal_store)
        self.tasks = TaskTables(database)
        self.approvals = ApprovalIndex(self.tasks)
        # Leases between processes only when there are other processes (PostgreSQL); one
        # process's compaction consumer already runs one compaction per session.
        self.leases: CompactionLeases = (
            StoreLeases(self.tasks, clock) if database.shared else LocalLeases()
        )

    @classmethod
    async def open(cls, url: str | Path, *, clock: Clock | None = None) -> Store:
        """Open the store ``url`` names, creating its tables when missing; a clear
        :class:`~ankka._kernel.errors.StoreError` when it cannot be opened."""
        path = sqlite_path(str(url))
        database: Database
        if path is None:
            from ankka.runtime.store.postgres import PostgresDatabase

            database = await PostgresDatabase.open(str(url), (*_SIDE_TABLES, SESSION_SCHEMA))
        else:
            database = await SqliteDatabase.open(path, _SIDE_TABLES)
        return cls(database, clock=clock)

    @property
    def shared(self) -> bool:
        """True when other processes may use the same store (PostgreSQL)."""
        return self.database.shared

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.database.close()


async def open_store(url: str | Path, *, clock: Clock | None = None) -> Store:
    """:meth:`Store.open`."""
    return await Store.open(url, clock=clock)
