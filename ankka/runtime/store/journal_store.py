"""The journal store seam: what SQLite (embedded) and PostgreSQL (many pods) implement.

A store appends a batch of events to one session's stream atomically and reads a stream from a
position. ``expected`` makes appends safe between processes: a writer says which position it
read up to, and the store refuses the batch (:class:`ConcurrentAppend`) if another writer got
there first, so no turn is written on top of a history it did not see.

A store knows nothing of what its events mean: it keeps ``(kind, body)`` pairs. Encoding them
is the :class:`~ankka.runtime.store.journal.Journal`'s job.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from ankka._kernel.errors import StoreError
from ankka.runtime.records.registry import StoredEvent

__all__ = ["ConcurrentAppend", "JournalStore", "SharedSessionLock"]


class ConcurrentAppend(StoreError):
    """Another writer appended to the session after this writer read it."""

    kind = "concurrent_append"
    status = 409


class SharedSessionLock(Protocol):
    """A lock on a session shared by every process serving it (e.g. in PostgreSQL)."""

    def hold(self, session: str) -> AbstractAsyncContextManager[None]: ...


class JournalStore(Protocol):
    async def append(
        self, session: str, events: Sequence[tuple[str, str]], *, expected: int
    ) -> int:
        """Append ``(kind, body)`` events after position ``expected``; return the new last
        position. All or nothing: the batch is committed durably before this returns."""
        ...

    async def read(self, session: str, *, after: int = 0) -> list[StoredEvent]:
        """The session's events with position greater than ``after``, in order."""
        ...

    async def sessions(self) -> list[str]: ...

    def session_lock(self) -> SharedSessionLock | None:
        """The lock that keeps one turn at a time per session across every process using this
        store, or None when the store is used by one process only (SQLite): the in-process
        queue is then enough, and ``expected`` still guards every append."""
        ...

    async def close(self) -> None: ...
