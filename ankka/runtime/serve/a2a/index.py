"""The A2A tables: the tasks A2A callers started, push notification configs, and the outbox.

Beside the task store's own tables (the journal's SQLite file, or its PostgreSQL database,
through the task store's transactions, ``?`` placeholders for both):

- ``ankka_a2a_tasks``: one row per A2A task. For a request agent the task is a turn in the
  session its ``contextId`` names, and the turn's journal id is the task's id, so the journal
  says whether a retried message's turn was committed; the row is the index (GetTask, ListTasks)
  and the claim that keeps two deliveries of one message from running twice. For an
  autonomous agent the task *is* the runtime's task (same id); the row keeps its context and
  the message that created it.
- ``ankka_a2a_push``: push notification configs per task (the token and credentials are kept
  to be sent, and never shown back).
- ``ankka_a2a_outbox``: the events to deliver, one row per config and event, numbered per task
  (the number is the event's stable id), retried with backoff until delivered or abandoned.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ankka.runtime.store.readable import EVERYONE, Readers, clause
from ankka.runtime.store.tasks import TaskStore, Transaction, create_tables

__all__ = ["SCHEMA", "A2AIndex", "OutboxRow", "PushConfig", "TaskRow"]

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ankka_a2a_tasks (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    kind TEXT NOT NULL,
    context_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    created_by TEXT NOT NULL,
    state TEXT NOT NULL,
    body TEXT NOT NULL,
    owner TEXT,
    claimed_at DOUBLE PRECISION,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS ankka_a2a_tasks_by_agent ON ankka_a2a_tasks (agent, updated_at)",
    """CREATE TABLE IF NOT EXISTS ankka_a2a_push (
    task TEXT NOT NULL,
    id TEXT NOT NULL,
    url TEXT NOT NULL,
    token TEXT NOT NULL,
    scheme TEXT NOT NULL,
    credentials TEXT NOT NULL,
    created_by TEXT NOT NULL,
    seen TEXT NOT NULL,
    done INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (task, id)
)""",
    "CREATE INDEX IF NOT EXISTS ankka_a2a_push_open ON ankka_a2a_push (done, task)",
    """CREATE TABLE IF NOT EXISTS ankka_a2a_outbox (
    task TEXT NOT NULL,
    config TEXT NOT NULL,
    seq BIGINT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    next_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (task, config, seq)
)""",
    "CREATE INDEX IF NOT EXISTS ankka_a2a_outbox_due ON ankka_a2a_outbox (state, next_at)",
)

_TASK_COLUMNS = (
    "id, agent, kind, context_id, message_id, created_by, state, body, owner, claimed_at, "
    "created_at, updated_at"
)


@dataclass(frozen=True, slots=True)
class TaskRow:
    id: str
    agent: str
    kind: str  # "turn" (a request agent's) or "task" (an autonomous agent's)
    context_id: str
    message_id: str
    created_by: str
    state: str  # the A2A state's short name: submitted, working, completed, ...
    body: dict[str, Any]
    owner: str | None
    claimed_at: float | None
    created_at: str
    updated_at: str


def _task(r: Sequence[Any]) -> TaskRow:
    return TaskRow(
        str(r[0]),
        str(r[1]),
        str(r[2]),
        str(r[3]),
        str(r[4]),
        str(r[5]),
        str(r[6]),
        json.loads(r[7]),
        r[8],
        float(r[9]) if r[9] is not None else None,
        str(r[10]),
        str(r[11]),
    )


@dataclass(frozen=True, slots=True)
class PushConfig:
    task: str
    id: str
    url: str
    token: str
    scheme: str
    credentials: str
    created_by: str
    seen: str  # the signature of the last state an event was made for
    done: bool


_PUSH_COLUMNS = "task, id, url, token, scheme, credentials, created_by, seen, done"


def _push(r: Sequence[Any]) -> PushConfig:
    return PushConfig(
        str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]), str(r[6]), str(r[7]),
        bool(r[8]),
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class OutboxRow:
    task: str
    config: str
    seq: int
    body: dict[str, Any]
    attempts: int


def _iso(at: datetime) -> str:
    return at.isoformat(timespec="microseconds")


class A2AIndex:
    """The three tables, each method one transaction."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store

    async def create(self) -> None:
        await create_tables(self.store, SCHEMA)

    # -- tasks --------------------------------------------------------------------------------

    async def claim(
        self, row: TaskRow, *, stale_before: float, now: float
    ) -> tuple[TaskRow | None, bool]:
        """Insert ``row``, claimed by its owner: (None, False) when it went in, (the row that
        was there, True) when that row's claim was stale and is now ``row``'s owner's (whatever
        its process did before it died must be looked up), else (the row there, False)."""

        def work(tx: Transaction) -> tuple[TaskRow | None, bool]:
            found = tx.rows(f"SELECT {_TASK_COLUMNS} FROM ankka_a2a_tasks WHERE id = ?", (row.id,))
            if not found:
                tx.rows(
                    f"INSERT INTO ankka_a2a_tasks ({_TASK_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        row.id, row.agent, row.kind, row.context_id, row.message_id,
                        row.created_by, row.state, json.dumps(row.body), row.owner, now,
                        row.created_at, row.updated_at,
                    ),
                )  # fmt: skip
                return None, False
            there = _task(found[0])
            claimed = there.claimed_at or 0.0
            if there.state == "submitted" and there.owner != row.owner and claimed < stale_before:
                tx.rows(
                    "UPDATE ankka_a2a_tasks SET owner = ?, claimed_at = ? WHERE id = ?",
                    (row.owner, now, row.id),
                )
                return there, True
            return there, False

        result: tuple[TaskRow | None, bool] = await self.store.write(work)
        return result

    async def settle(self, task: str, state: str, body: dict[str, Any], at: datetime) -> None:
        """Record a task's A2A state and what it answered."""
        await self.store.write(
            lambda tx: tx.rows(
                "UPDATE ankka_a2a_tasks SET state = ?, body = ?, updated_at = ? WHERE id = ?",
                (state, json.dumps(body), _iso(at), task),
            )
        )

    async def get(self, task: str) -> TaskRow | None:
        def work(tx: Transaction) -> TaskRow | None:
            found = tx.rows(f"SELECT {_TASK_COLUMNS} FROM ankka_a2a_tasks WHERE id = ?", (task,))
            return _task(found[0]) if found else None

        result: TaskRow | None = await self.store.read(work)
        return result

    async def page(
        self,
        agent: str,
        *,
        before: tuple[str, str] | None,
        limit: int,
        context: str | None,
        who: Readers = EVERYONE,
    ) -> list[TaskRow]:
        """``agent``'s rows ``who`` may read (in the query), most recently updated first,
        after the cursor ``before`` ((updated_at, id) of the last row of the previous page)."""
        readable, params = clause(who, "created_by", "agent")
        where = ["agent = ?", readable]
        params.insert(0, agent)
        if before is not None:
            where.append("(updated_at < ? OR (updated_at = ? AND id < ?))")
            params += [before[0], before[0], before[1]]
        if context is not None:
            where.append("context_id = ?")
            params.append(context)
        sql = (
            f"SELECT {_TASK_COLUMNS} FROM ankka_a2a_tasks WHERE {' AND '.join(where)} "
            f"ORDER BY updated_at DESC, id DESC LIMIT {int(limit)}"
        )

        def work(tx: Transaction) -> list[TaskRow]:
            return [_task(r) for r in tx.rows(sql, params)]

        result: list[TaskRow] = await self.store.read(work)
        return result

    # -- push configs ---------------------------------------------------------------------------

    async def put_push(self, config: PushConfig, at: datetime) -> None:
        def work(tx: Transaction) -> None:
            key = (config.task, config.id)
            tx.rows("DELETE FROM ankka_a2a_push WHERE task = ? AND id = ?", key)
            tx.rows(
                f"INSERT INTO ankka_a2a_push ({_PUSH_COLUMNS}, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    config.task, config.id, config.url, config.token, config.scheme,
                    config.credentials, config.created_by, config.seen, int(config.done),
                    _iso(at),
                ),
            )  # fmt: skip

        await self.store.write(work)

    async def pushes(self, task: str) -> list[PushConfig]:
        def work(tx: Transaction) -> list[PushConfig]:
            rows = tx.rows(
                f"SELECT {_PUSH_COLUMNS} FROM ankka_a2a_push WHERE task = ? "
                "ORDER BY created_at, id",
                (task,),
            )
            return [_push(r) for r in rows]

        result: list[PushConfig] = await self.store.read(work)
        return result

    async def open_pushes(self) -> list[PushConfig]:
        """Every config whose task may still change (its last event was not final)."""

        def work(tx: Transaction) -> list[PushConfig]:
            rows = tx.rows(f"SELECT {_PUSH_COLUMNS} FROM ankka_a2a_push WHERE done = 0")
            return [_push(r) for r in rows]

        result: list[PushConfig] = await self.store.read(work)
        return result

    async def delete_push(self, task: str, config: str) -> None:
        def work(tx: Transaction) -> None:
            tx.rows("DELETE FROM ankka_a2a_push WHERE task = ? AND id = ?", (task, config))
            tx.rows(
                "UPDATE ankka_a2a_outbox SET state = 'deleted' "
                "WHERE task = ? AND config = ? AND state = 'pending'",
                (task, config),
            )

        await self.store.write(work)

    # -- the outbox -----------------------------------------------------------------------------

    async def enqueue(
        self,
        config: PushConfig,
        seen: str,
        done: bool,
        bodies: Sequence[dict[str, Any]],
        now: float,
    ) -> int | None:
        """Events for ``config``, in the same transaction as the state they were made for
        (``seen``), so a restart neither loses them nor makes them twice; the last number, or
        None when the config has moved on meanwhile (another process made these events)."""

        def work(tx: Transaction) -> int | None:
            moved = tx.rows(
                "SELECT seen FROM ankka_a2a_push WHERE task = ? AND id = ?",
                (config.task, config.id),
            )
            if not moved or moved[0][0] != config.seen:
                return None
            last = tx.rows(
                "SELECT MAX(seq) FROM ankka_a2a_outbox WHERE task = ? AND config = ?",
                (config.task, config.id),
            )
            seq = int(last[0][0] or 0)
            for body in bodies:
                seq += 1
                tx.rows(
                    "INSERT INTO ankka_a2a_outbox "
                    "(task, config, seq, body, state, attempts, next_at) "
                    "VALUES (?, ?, ?, ?, 'pending', 0, ?)",
                    (config.task, config.id, seq, json.dumps(body), now),
                )
            tx.rows(
                "UPDATE ankka_a2a_push SET seen = ?, done = ? WHERE task = ? AND id = ?",
                (seen, int(done), config.task, config.id),
            )
            return seq

        result: int | None = await self.store.write(work)
        return result

    async def heads(self, now: float, limit: int = 256) -> list[OutboxRow]:
        """The first pending event of each config, when its time has come: a config's events
        go out in order, the next only after the one before."""

        def work(tx: Transaction) -> list[OutboxRow]:
            rows = tx.rows(
                "SELECT task, config, seq, body, attempts, next_at FROM ankka_a2a_outbox "
                f"WHERE state = 'pending' ORDER BY task, config, seq LIMIT {int(limit)}"
            )
            heads: set[tuple[str, str]] = set()
            due: list[OutboxRow] = []
            for r in rows:
                key = (str(r[0]), str(r[1]))
                if key in heads:
                    continue
                heads.add(key)
                if float(r[5]) <= now:
                    due.append(OutboxRow(key[0], key[1], int(r[2]), json.loads(r[3]), int(r[4])))
            return due

        result: list[OutboxRow] = await self.store.read(work)
        return result

    async def events(self, task: str) -> list[tuple[str, int, str, dict[str, Any]]]:
        """Every event made for ``task``: (config, number, state, body), in order."""

        def work(tx: Transaction) -> list[tuple[str, int, str, dict[str, Any]]]:
            rows = tx.rows(
                "SELECT config, seq, state, body FROM ankka_a2a_outbox WHERE task = ? "
                "ORDER BY config, seq",
                (task,),
            )
            return [(str(r[0]), int(r[1]), str(r[2]), json.loads(r[3])) for r in rows]

        result: list[tuple[str, int, str, dict[str, Any]]] = await self.store.read(work)
        return result

    async def delivered(self, row: OutboxRow) -> None:
        await self.store.write(
            lambda tx: tx.rows(
                "UPDATE ankka_a2a_outbox SET state = 'delivered', attempts = ? "
                "WHERE task = ? AND config = ? AND seq = ?",
                (row.attempts + 1, row.task, row.config, row.seq),
            )
        )

    async def failed(self, row: OutboxRow, next_at: float, *, abandon: bool) -> None:
        state = "abandoned" if abandon else "pending"
        await self.store.write(
            lambda tx: tx.rows(
                "UPDATE ankka_a2a_outbox SET state = ?, attempts = ?, next_at = ? "
                "WHERE task = ? AND config = ? AND seq = ?",
                (state, row.attempts + 1, next_at, row.task, row.config, row.seq),
            )
        )
