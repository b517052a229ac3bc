"""Open the task store beside the journal: the same URL (``--store``), tables of its own."""

from __future__ import annotations

from ankka.runtime.store.open import sqlite_path
from ankka.runtime.store.sqlite_tasks import SqliteTaskStore
from ankka.runtime.store.tasks import TaskStore

__all__ = ["open_task_store"]


async def open_task_store(url: str) -> TaskStore:
    path = sqlite_path(url)
    if path is None:
        from ankka.runtime.store.postgres_tasks import PostgresTaskStore

        return await PostgresTaskStore.open(url)
    return await SqliteTaskStore.open(path)
