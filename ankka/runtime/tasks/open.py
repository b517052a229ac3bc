"""Open the task store beside the journal: the same URL (``--store``), tables of its own."""

from __future__ import annotations

from ankka.runtime.journal.open import sqlite_path
from ankka.runtime.tasks.sqlite_store import SqliteTaskStore
from ankka.runtime.tasks.store import TaskStore

__all__ = ["open_task_store"]


async def open_task_store(url: str) -> TaskStore:
    path = sqlite_path(url)
    if path is None:
        from ankka.runtime.tasks.postgres_store import PostgresTaskStore

        return await PostgresTaskStore.open(url)
    return await SqliteTaskStore.open(path)
