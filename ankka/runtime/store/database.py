"""The seam under every view of the store: one database, and the transaction its statements
run in.

A store URL names one database (a SQLite file, a PostgreSQL database), opened once
(:class:`~ankka.runtime.store.open.Store`). The journal, the task tables, the approval index
and the leases are views over it, and every statement any of them makes is a plain function of
a :class:`Transaction`, run by the one :class:`Database`:

- ``write(work)`` runs ``work(tx)`` in a transaction committed durably before it returns, and
  answers what ``work`` returned (typed: the work's own return type);
- ``read(work)`` runs it over the last committed state.

Because the journal's append and read are methods of the same transaction as the side tables'
rows, anything the store holds can change in one commit (a task iteration's response with its
task record; one round trip, one fsync) or be read in one round trip (the events a fold lacks
with the task's row). The statements are written once, with ``?`` placeholders, for both
databases; a :class:`Transaction` knows its database's journal table and timestamp type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from ankka.runtime.records.registry import StoredEvent

__all__ = [
    "AddedColumn",
    "Database",
    "NoticeRelay",
    "Row",
    "SchemaStep",
    "SharedSessionLock",
    "Transaction",
    "Work",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

# A row as the database driver returns it. SQL rows are untyped at this one boundary: each
# statement function turns its rows into typed values (records, ids) before they leave it.
Row = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class AddedColumn:
    """A column added to a side table after stores were written without it: a step of the
    schema each database takes its own way when the store is opened (SQLite has no
    ``ADD COLUMN IF NOT EXISTS``: it reads ``PRAGMA table_info`` first, in a write
    transaction; PostgreSQL reads ``information_schema.columns`` first too, since its
    ``ALTER TABLE`` locks the table out even when the column is there, and keeps ``IF NOT
    EXISTS`` for two openers racing). ``definition`` needs a ``DEFAULT`` when it is ``NOT
    NULL``: the rows already there take it. The table's ``CREATE TABLE`` names the column
    too, so a new store has it from the start and this step finds it there."""

    table: str
    column: str
    definition: str


# What a store's schema is made of: ``CREATE ... IF NOT EXISTS`` statements, and columns
# added since (both run, in order, each time a store is opened).
SchemaStep = str | AddedColumn


class Transaction(Protocol):
    """One open transaction on the store's database."""

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Run ``sql`` (``?`` placeholders); the rows it returns (none for a change without
        ``RETURNING``)."""
        ...

    def append(
        self, session: str, events: Sequence[tuple[str, str]], *, expected: int, at: datetime
    ) -> int:
        """Append ``(kind, body)`` events to ``session`` after position ``expected``; the new
        last position. Raises :class:`~ankka.runtime.store.journal_store.ConcurrentAppend` when
        the session's last position is not ``expected``."""
        ...

    def events(self, session: str, *, after: int = 0) -> list[StoredEvent]:
        """The session's events with position greater than ``after``, in order."""
        ...

    def sessions(self) -> list[str]:
        """Every session with an event, least recently active first (its last event's
        time)."""
        ...

    def journal_table(self) -> str:
        """The journal's table (``session``, ``seq``, ``kind``, ``body``, ``at``), for a
        statement that joins a row to its session's records."""
        ...

    def json_text(self, column: str, key: str) -> str:
        """The SQL of the top-level string ``key`` of the JSON text in ``column`` (NULL when
        absent); ``key`` is the caller's own constant, never input."""
        ...

    def stamp(self) -> str:
        """The placeholder of an event time given as ISO text, comparable to the journal's
        ``at``."""
        ...


Work = Callable[[Transaction], T]


class SharedSessionLock(Protocol):
    """A lock on a session shared by every process serving it (e.g. in PostgreSQL)."""

    def hold(self, session: str) -> AbstractAsyncContextManager[None]: ...


class NoticeRelay(Protocol):
    """Carries small notices between every process using the store (PostgreSQL's
    LISTEN/NOTIFY): what one process sends, every process's listeners get, its own included.
    Sending never waits; a notice is best effort (live, not durable): what is sent while a
    process's listening connection is down never reaches it, and ``resync`` says so.

    One process on its database (SQLite) has no relay (:meth:`Database.notices` is None): its
    notifier reaches every subscriber itself, and nothing is ever missed."""

    def send(self, payload: str) -> None: ...

    def listen(
        self, deliver: Callable[[str], None], resync: Callable[[], None]
    ) -> Callable[[], None]:
        """Call ``deliver`` on the event loop with each payload sent by any process from now
        on, and ``resync`` (on the event loop too) each time notices may have been missed
        since: the listening connection came back after a break, or connected at last after
        its first attempt failed. ``resync`` comes once the relay hears again, so what its
        listener re-reads from the store then misses nothing sent after. The returned
        function stops both."""
        ...


class Database(Protocol):
    async def write(self, work: Callable[[Transaction], T], *, serial: bool = True) -> T:
        """Run ``work`` in one transaction, committed before this returns. ``serial``: it may
        change many rows (a task's creation, a cascade, a claim), so such writers run one at
        a time across processes; ``serial=False`` is for a change of one session's events or
        one task's row, which may commit beside others."""
        ...

    async def read(self, work: Callable[[Transaction], T]) -> T:
        """Run ``work`` over the last committed state (it must not change anything)."""
        ...

    @property
    def shared(self) -> bool:
        """True when other processes may use the same database (leases then bound takeover)."""
        ...

    @property
    def where(self) -> str:
        """The database as errors name it (a path, a DSN without its password)."""
        ...

    def session_lock(self) -> SharedSessionLock | None:
        """The lock that keeps one turn at a time per session across every process, or None
        when one process uses the database (SQLite)."""
        ...

    def notices(self) -> NoticeRelay | None:
        """The relay between processes, or None when one process uses the database."""
        ...

    async def close(self) -> None: ...
