"""Open a journal store from a URL (``--store``).

``sqlite:///path`` (or a plain file path) for the embedded store; ``postgresql://...`` for the
store shared by many pods (needs the ``postgres`` extra; imported only when asked for).
"""

from __future__ import annotations

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.store.journal_store import JournalStore
from ankka.runtime.store.sqlite import SqliteStore

__all__ = ["DEFAULT_STORE", "open_store", "sqlite_path"]

DEFAULT_STORE = "sqlite:///ankka.sqlite3"


def sqlite_path(url: str) -> str | None:
    """The SQLite file a store URL names, or None for a PostgreSQL URL; a clear error for
    anything else. The task store (``ankka.runtime.store.open_tasks``) reads the same URL."""
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


async def open_store(url: str) -> JournalStore:
    path = sqlite_path(url)
    if path is None:
        from ankka.runtime.store.postgres import PostgresStore

        return await PostgresStore.open(url)
    return await SqliteStore.open(path)
