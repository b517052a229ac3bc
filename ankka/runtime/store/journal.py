"""The journal as the runtime uses it: typed records in, typed records out.

:class:`Journal` is the one door to a session's stream. Everything that writes or reads
session memory (the host's turns today; task iterations, approvals, compaction and MCP next)
goes through it, never through the store, so the stored encoding lives in one place
(:mod:`.events`) and a store stays a keeper of ``(kind, body)`` pairs::

    journal = Journal(store)
    position = await journal.append("s1", [UserMessage("hi"), answer], expected=0)
    for entry in await journal.read("s1", after=0):
        entry.seq, entry.at, entry.record          # 1, datetime(UTC), UserMessage("hi")
    await journal.conversation("s1")               # the fold: [UserMessage("hi"), answer]

Appends are all or nothing and name the position the writer read (``expected``); a store
refuses a batch on top of a history the writer did not see (:class:`~.store.ConcurrentAppend`).
One turn at a time per session across processes is :meth:`session_lock`'s, when the store has
one.
"""

from __future__ import annotations

from collections.abc import Sequence

from ankka.runtime.records.fold import fold
from ankka.runtime.records.messages import Message
from ankka.runtime.records.registry import Entry, Record, decode, encode
from ankka.runtime.store.journal_store import JournalStore, SharedSessionLock

__all__ = ["Journal"]


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

    async def read(self, session: str, *, after: int = 0) -> list[Entry]:
        """The session's records after position ``after``, in order, with their positions."""
        return [
            Entry(e.seq, e.at, decode(e.kind, e.body))
            for e in await self._store.read(session, after=after)
        ]

    async def conversation(self, session: str) -> list[Message]:
        """The session's conversation as committed: the fold of all its records."""
        return fold(e.record for e in await self.read(session))

    async def sessions(self) -> list[str]:
        """Every session, least recently active first (by its last record's time)."""
        return await self._store.sessions()

    def session_lock(self) -> SharedSessionLock | None:
        """The store's cross-process turn lock, or None when it has none (see the store)."""
        return self._store.session_lock()

    async def close(self) -> None:
        await self._store.close()
