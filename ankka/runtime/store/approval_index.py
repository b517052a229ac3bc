"""The approval index: each request's row, found by id, and the durable expiry timers.

The journal is the truth of an approval (:mod:`.records`); this table, beside it (the
journal's SQLite file, or its PostgreSQL database, through the task store's transactions),
answers what the journal cannot cheaply: which session holds approval ``id``, which requests
are pending across sessions, and which expire when. A row is written *before* its suspension
is recorded, so a request never exists without its timer; a row whose suspension was never
recorded (a crash between the two) is found by its missing journal record and dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ankka.runtime.store.database import Row, Transaction
from ankka.runtime.store.readable import EVERYONE, Cursor, Readers, clause, opened
from ankka.runtime.store.tasks import TaskStore, create_tables

__all__ = ["SCHEMA", "ApprovalIndex", "IndexRow", "cursor_of"]

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ankka_approvals (
    id TEXT PRIMARY KEY,
    session TEXT NOT NULL,
    agent TEXT NOT NULL,
    tool TEXT NOT NULL,
    state TEXT NOT NULL,
    expires_at DOUBLE PRECISION,
    noticed INTEGER NOT NULL,
    open INTEGER NOT NULL,
    created_at TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS ankka_approvals_pending ON ankka_approvals (state, expires_at)",
    "CREATE INDEX IF NOT EXISTS ankka_approvals_session ON ankka_approvals (session)",
)

_COLUMNS = "id, session, agent, tool, state, expires_at, noticed, open"
_COLUMNS_OF = ", ".join(f"a.{c}" for c in _COLUMNS.split(", "))


@dataclass(frozen=True, slots=True)
class IndexRow:
    id: str
    session: str
    agent: str
    tool: str
    state: str
    expires_at: datetime | None
    noticed: bool
    open: bool
    created_at: str = ""  # when its turn was suspended (ISO text), as :meth:`find` and
    # :meth:`get` read it: the listing's sort key, and an approval's wait's start


def _row(r: Row) -> IndexRow:
    at = datetime.fromtimestamp(float(r[5]), UTC) if r[5] is not None else None
    made = str(r[8]) if len(r) > 8 else ""
    return IndexRow(r[0], r[1], r[2], r[3], r[4], at, bool(r[6]), bool(r[7]), made)


def cursor_of(row: IndexRow) -> Cursor:
    """Where the page after ``row`` starts."""
    return (row.created_at, row.id)


class ApprovalIndex:
    def __init__(self, store: TaskStore) -> None:
        self.store = store

    async def create(self) -> None:
        await create_tables(self.store, SCHEMA)

    async def schedule(
        self,
        session: str,
        agent: str,
        requests: Sequence[tuple[str, str, datetime | None]],
        now: datetime,
    ) -> None:
        """Insert ``(id, tool, expires_at)`` rows, pending: before the suspension is
        recorded, so its timer exists first."""

        def work(tx: Transaction) -> None:
            for approval, tool, expires in requests:
                tx.rows(
                    "INSERT INTO ankka_approvals (id, session, agent, tool, state, expires_at, "
                    "noticed, open, created_at) VALUES (?, ?, ?, ?, 'pending', ?, 0, 1, ?)",
                    (
                        approval,
                        session,
                        agent,
                        tool,
                        expires.timestamp() if expires is not None else None,
                        now.isoformat(),
                    ),
                )

        await self.store.write(work)

    async def get(self, approval: str) -> IndexRow | None:
        def work(tx: Transaction) -> IndexRow | None:
            found = tx.rows(
                f"SELECT {_COLUMNS}, created_at FROM ankka_approvals WHERE id = ?", (approval,)
            )
            return _row(found[0]) if found else None

        return await self.store.read(work)

    async def settle(self, approvals: Sequence[str], state: str, *, close: bool = False) -> None:
        def work(tx: Transaction) -> None:
            for approval in approvals:
                tx.rows(
                    "UPDATE ankka_approvals SET state = ?, open = ? WHERE id = ?",
                    (state, 0 if close else 1, approval),
                )

        await self.store.write(work)

    async def close_session(self, session: str, states: Mapping[str, str] | None = None) -> None:
        """The session's suspended turn finished or ended: none of its rows is open; each of
        ``states`` (approval id → its decision) is written in the same transaction."""

        def work(tx: Transaction) -> None:
            for approval, state in (states or {}).items():
                tx.rows("UPDATE ankka_approvals SET state = ? WHERE id = ?", (state, approval))
            tx.rows(
                "UPDATE ankka_approvals SET open = 0, state = CASE WHEN state = 'pending' "
                "THEN 'ended' ELSE state END WHERE session = ? AND open = 1",
                (session,),
            )

        await self.store.write(work)

    async def noticed(self, approval: str) -> None:
        def work(tx: Transaction) -> None:
            tx.rows("UPDATE ankka_approvals SET noticed = 1 WHERE id = ?", (approval,))

        await self.store.write(work)

    async def drop(self, approvals: Sequence[str]) -> None:
        def work(tx: Transaction) -> None:
            for approval in approvals:
                tx.rows("DELETE FROM ankka_approvals WHERE id = ?", (approval,))

        await self.store.write(work)

    async def find(
        self,
        *,
        session: str | None = None,
        agent: str | None = None,
        state: str | None = None,
        limit: int = 500,
        who: Readers = EVERYONE,
        after: Cursor | None = None,
        newest: bool = False,
    ) -> list[IndexRow]:
        """The rows passing the filters that ``who`` may read (its sessions' creators, in the
        query: issue 31, item 3), oldest first (``newest``: newest first), after the cursor
        ``after`` (:func:`cursor_of` of the previous page's last row)."""
        where, params = [], []
        for column, value in (("a.session", session), ("a.agent", agent), ("a.state", state)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if after is not None:
            older = "<" if newest else ">"
            where.append(f"(a.created_at {older} ? OR (a.created_at = ? AND a.id {older} ?))")
            params += [after[0], after[0], after[1]]
        order = "DESC" if newest else "ASC"

        def work(tx: Transaction) -> list[IndexRow]:
            join, creator, of_agent = opened(tx, "a.session")
            condition, allowed = clause(who, creator, of_agent)
            rows = tx.rows(
                f"SELECT {_COLUMNS_OF}, a.created_at FROM ankka_approvals a {join} "
                f"WHERE {' AND '.join([*where, condition])} "
                f"ORDER BY a.created_at {order}, a.id {order} LIMIT {int(limit)}",
                [*params, *allowed],
            )
            return [_row(r) for r in rows]

        return await self.store.read(work)

    async def timed(self, before: datetime) -> list[IndexRow]:
        """Pending rows that expire at or before ``before``."""

        def work(tx: Transaction) -> list[IndexRow]:
            rows = tx.rows(
                f"SELECT {_COLUMNS} FROM ankka_approvals WHERE state = 'pending' AND "
                "expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at",
                (before.timestamp(),),
            )
            return [_row(r) for r in rows]

        return await self.store.read(work)

    async def pending_count(self) -> int:
        """How many requests wait for a decision (every replica's)."""

        def work(tx: Transaction) -> int:
            rows = tx.rows("SELECT COUNT(*) FROM ankka_approvals WHERE state = 'pending'")
            return int(rows[0][0]) if rows else 0

        return await self.store.read(work)

    async def open_sessions(self) -> list[str]:
        def work(tx: Transaction) -> list[str]:
            rows = tx.rows("SELECT DISTINCT session FROM ankka_approvals WHERE open = 1")
            return [str(r[0]) for r in rows]

        return await self.store.read(work)
