"""The journal as the runtime uses it: typed records in, typed records out.

:class:`Journal` is the one door to a session's stream. Everything that writes or reads
session memory (the host's turns today; task iterations, approvals, compaction and MCP next)
goes through it, never through the store, so the stored encoding lives in one place
(:mod:`ankka.runtime.records.registry`) and a store stays a keeper of ``(kind, body)``
pairs::

    journal = Journal(store)
    position = await journal.append("s1", [UserMessage("hi"), answer], expected=0)
    for entry in await journal.read("s1", after=0):
        entry.seq, entry.at, entry.record          # 1, datetime(UTC), UserMessage("hi")
    await journal.conversation("s1")               # the fold: [UserMessage("hi"), answer]

Appends are all or nothing and name the position the writer read (``expected``); a store
refuses a batch on top of a history the writer did not see (:class:`~.store.ConcurrentAppend`).
One turn at a time per session across processes is :meth:`session_lock`'s, when the store has
one.

The journal's tables share the store's one database with the task tables and the approval
index, so an append and a change there can be one transaction (:meth:`commit`), and the records
a cached fold lacks can be read with a task's row in one round trip (:meth:`read_with`)::

    done = await journal.commit("task:t1", [marks, answer], expected=4,
                                then=partial(statements.complete_iteration, task="t1", ...))
    done.position, done.value                      # 6, the task's record after it
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from ankka.runtime.records.fold import fold
from ankka.runtime.records.messages import Message
from ankka.runtime.records.registry import Entry, Record, StoredEvent, decode, encode
from ankka.runtime.store.database import Transaction
from ankka.runtime.store.journal_store import JournalStore, SharedSessionLock, Written
from ankka.runtime.store.readable import Cursor, Readers

__all__ = ["Committed", "Journal", "Since"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

# A combined commit's answer: the session's new last position and what ``then`` returned.
Committed = Written


@dataclass(frozen=True, slots=True)
class Since(Generic[T_co]):
    """A combined read's answer: the session's records after the position asked for (what a
    cached fold lacks), and what ``then`` returned from the same read."""

    entries: list[Entry]
    value: T_co


def _decoded(events: Sequence[StoredEvent]) -> list[Entry]:
    return [Entry(e.seq, e.at, decode(e.kind, e.body)) for e in events]


class Journal:
    def __init__(self, store: JournalStore) -> None:
        self._store = store

    @property
    def store(self) -> JournalStore:
        return self._store

    async def __aenter__(self) -> Journal:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def append(self, session: str, records: Sequence[Record], *, expected: int) -> int:
        """Append ``records`` after position ``expected`` in one atomic batch; return the new
        last position. Nothing is written if any part fails."""
        return await self._store.append(session, [encode(r) for r in records], expected=expected)

    async def commit(
        self,
        session: str,
        records: Sequence[Record],
        *,
        expected: int,
        then: Callable[[Transaction], T],
        serial: bool = False,
    ) -> Written[T]:
        """:meth:`append` ``records`` and run ``then(tx)`` (a statement of the task tables,
        the approval index, ...) in the same transaction: one round trip, one commit, all or
        nothing. A refused append (:class:`~.journal_store.ConcurrentAppend`) runs no
        ``then``; ``then`` raising writes none of the records. ``serial``: ``then`` changes
        many rows (see :meth:`~.database.Database.write`)."""
        events = [encode(r) for r in records]
        return await self._store.commit(
            session, events, expected=expected, then=then, serial=serial
        )

    async def read(self, session: str, *, after: int = 0) -> list[Entry]:
        """The session's records after position ``after``, in order, with their positions."""
        return _decoded(await self._store.read(session, after=after))

    async def read_with(
        self, session: str, *, after: int, then: Callable[[Transaction], T]
    ) -> Since[T]:
        """The session's records after ``after`` (what a cached fold lacks) and ``then(tx)``
        (a task's row, ...), in one read: one round trip."""
        found = await self._store.read_with(session, after=after, then=then)
        return Since(_decoded(found.events), found.value)

    async def conversation(self, session: str) -> list[Message]:
        """The session's conversation as committed: the fold of all its records."""
        return fold(e.record for e in await self.read(session))

    async def sessions(self) -> list[str]:
        """Every session, least recently active first (by its last record's time)."""
        return await self._store.sessions()

    async def readable(self, who: Readers, *, after: Cursor | None, limit: int) -> list[Cursor]:
        """A page of the sessions ``who`` may read, most recently active first, after the
        cursor ``after``: each as its cursor key (last record's time, name)."""
        return await self._store.readable(who, after=after, limit=limit)

    def session_lock(self) -> SharedSessionLock | None:
        """The store's cross-process turn lock, or None when it has none (see the store)."""
        return self._store.session_lock()

    async def close(self) -> None:
        """Close the journal's store (a :class:`~.open.Store`'s journal closes nothing: the
        Store is its opener's)."""
        await self._store.close()
