"""The journal store seam, and the journal's tables as a view of the store's one database.

A journal store appends a batch of events to one session's stream atomically and reads a stream
from a position. ``expected`` makes appends safe between processes: a writer says which
position it read up to, and the store refuses the batch (:class:`ConcurrentAppend`) if another
writer got there first, so no turn is written on top of a history it did not see.

A store knows nothing of what its events mean: it keeps ``(kind, body)`` pairs. Encoding them
is the :class:`~ankka.runtime.store.journal.Journal`'s job. :class:`JournalTables` is the one
implementation: the journal's statements (:meth:`Transaction.append`, ``events``) run on the
store's :class:`~ankka.runtime.store.database.Database`, so an append can share its
transaction with any other statement of the store (:meth:`JournalStore.commit`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, Protocol, TypeVar

from ankka._kernel.errors import StoreError
from ankka.runtime.records.registry import StoredEvent
from ankka.runtime.store.database import Database, SharedSessionLock, Transaction
from ankka.runtime.store.readable import Cursor, Readers, readable_sessions

__all__ = [
    "ConcurrentAppend",
    "JournalStore",
    "JournalTables",
    "ReadWith",
    "SharedSessionLock",
    "Written",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class ConcurrentAppend(StoreError):
    """Another writer appended to the session after this writer read it."""

    kind = "concurrent_append"
    status = 409


@dataclass(frozen=True, slots=True)
class Written(Generic[T_co]):
    """What a combined commit did: the session's new last position, and what the work that
    shared its transaction returned."""

    position: int
    value: T_co


@dataclass(frozen=True, slots=True)
class ReadWith(Generic[T_co]):
    """What a combined read found: the session's events after the position asked for, and what
    the work that shared its snapshot returned."""

    events: list[StoredEvent]
    value: T_co


class JournalStore(Protocol):
    async def append(
        self, session: str, events: Sequence[tuple[str, str]], *, expected: int
    ) -> int:
        """Append ``(kind, body)`` events after position ``expected``; return the new last
        position. All or nothing: the batch is committed durably before this returns."""
        ...

    async def commit(
        self,
        session: str,
        events: Sequence[tuple[str, str]],
        *,
        expected: int,
        then: Callable[[Transaction], T],
        serial: bool = False,
    ) -> Written[T]:
        """:meth:`append`, and ``then(tx)`` in the same transaction: one commit, all or
        nothing (``then`` raising undoes the append; a refused append runs no ``then``)."""
        ...

    async def read(self, session: str, *, after: int = 0) -> list[StoredEvent]:
        """The session's events with position greater than ``after``, in order."""
        ...

    async def read_with(
        self, session: str, *, after: int, then: Callable[[Transaction], T]
    ) -> ReadWith[T]:
        """:meth:`read`, and ``then(tx)`` in the same read: one round trip."""
        ...

    async def sessions(self) -> list[str]: ...

    async def readable(self, who: Readers, *, after: Cursor | None, limit: int) -> list[Cursor]:
        """The sessions ``who`` may read, most recently active first, after ``after``: each
        as its cursor key (:func:`~ankka.runtime.store.readable.readable_sessions`)."""
        ...

    def session_lock(self) -> SharedSessionLock | None:
        """The lock that keeps one turn at a time per session across every process using this
        store, or None when the store is used by one process only (SQLite): the in-process
        queue is then enough, and ``expected`` still guards every append."""
        ...

    async def close(self) -> None: ...


class JournalTables:
    """The journal's view of the store's database. Closing it closes nothing: the database is
    the :class:`~ankka.runtime.store.open.Store`'s, which its opener closes."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def append(
        self, session: str, events: Sequence[tuple[str, str]], *, expected: int
    ) -> int:
        at = datetime.now(UTC)

        def work(tx: Transaction) -> int:
            return tx.append(session, events, expected=expected, at=at)

        # Appends of other sessions that arrive meanwhile may share this one's commit.
        return await self.database.write(work, serial=False)

    async def commit(
        self,
        session: str,
        events: Sequence[tuple[str, str]],
        *,
        expected: int,
        then: Callable[[Transaction], T],
        serial: bool = False,
    ) -> Written[T]:
        at = datetime.now(UTC)

        def work(tx: Transaction) -> Written[T]:
            position = tx.append(session, events, expected=expected, at=at)
            return Written(position, then(tx))

        return await self.database.write(work, serial=serial)

    async def read(self, session: str, *, after: int = 0) -> list[StoredEvent]:
        def work(tx: Transaction) -> list[StoredEvent]:
            return tx.events(session, after=after)

        return await self.database.read(work)

    async def read_with(
        self, session: str, *, after: int, then: Callable[[Transaction], T]
    ) -> ReadWith[T]:
        def work(tx: Transaction) -> ReadWith[T]:
            return ReadWith(tx.events(session, after=after), then(tx))

        return await self.database.read(work)

    async def sessions(self) -> list[str]:
        def work(tx: Transaction) -> list[str]:
            return tx.sessions()

        return await self.database.read(work)

    async def readable(self, who: Readers, *, after: Cursor | None, limit: int) -> list[Cursor]:
        def work(tx: Transaction) -> list[Cursor]:
            return readable_sessions(tx, who, after=after, limit=limit)

        return await self.database.read(work)

    def session_lock(self) -> SharedSessionLock | None:
        return self.database.session_lock()

    async def close(self) -> None:
        return None  # the Store's opener closes the database
