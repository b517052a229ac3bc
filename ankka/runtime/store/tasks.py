"""The task store: tasks, their dependencies, instances and leases, in their own tables.

The same statements (:mod:`.task_statements`) run on SQLite (embedded) and PostgreSQL (many
processes), through the store's one database (:mod:`.database`), whose two kinds
(:mod:`.sqlite`, :mod:`.postgres`) differ only in how a transaction is opened and how a
placeholder is spelt. Every change is one transaction: a task's state, the
cascade of cancellations it causes at any depth, and the instance it ends all commit together,
so a process killed half-way leaves either all of it or none. What an instance did on a task
(its model responses and tool results) is not here: it is the journal session ``task:<id>``.

Writers of one instance's records are kept to one process by a lease (``claim``/``renew``):
a process that dies stops renewing, and after ``until`` another may claim the instance.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from ankka.runtime.records.messages import Usage
from ankka.runtime.records.tasks import (
    InstanceRecord,
    InstanceState,
    TaskRecord,
    TaskSpec,
    TaskState,
)
from ankka.runtime.store import trace_statements
from ankka.runtime.store.database import Database, NoticeRelay, Row, Transaction
from ankka.runtime.store.tree_statements import TREE_SCHEMA

__all__ = [
    "SCHEMA",
    "TASK_COLUMNS",
    "LIVE_EXCLUDED",
    "Ended",
    "Picked",
    "TaskStore",
    "TaskTables",
    "Transaction",
    "create_tables",
    "instance_from_row",
    "task_from_row",
]

# The states of a task no instance is working on: final, or not yet given to an instance. The
# ``ankka_tasks_live`` index and the statement that uses it must spell them alike.
LIVE_EXCLUDED = "('completed', 'failed', 'cancelled', 'pending')"

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS ankka_tasks (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    type TEXT NOT NULL,
    spec TEXT NOT NULL,
    digest TEXT NOT NULL,
    state TEXT NOT NULL,
    budget INTEGER NOT NULL,
    instance TEXT,
    own_instance INTEGER NOT NULL,
    iterations_used INTEGER NOT NULL,
    iteration_started INTEGER NOT NULL,
    started INTEGER NOT NULL,
    cancel_requested INTEGER NOT NULL,
    usage TEXT NOT NULL,
    result TEXT,
    reason TEXT,
    assigned_seq BIGINT,
    version BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS ankka_tasks_by_instance ON ankka_tasks (agent, instance)",
    """CREATE TABLE IF NOT EXISTS ankka_task_deps (
    task TEXT NOT NULL,
    depends_on TEXT NOT NULL,
    PRIMARY KEY (task, depends_on)
)""",
    "CREATE INDEX IF NOT EXISTS ankka_task_deps_back ON ankka_task_deps (depends_on)",
    """CREATE TABLE IF NOT EXISTS ankka_instances (
    agent TEXT NOT NULL,
    id TEXT NOT NULL,
    state TEXT NOT NULL,
    own INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    lease_owner TEXT,
    lease_until DOUBLE PRECISION,
    PRIMARY KEY (agent, id)
)""",
    # The hot reads' indexes, added after the tables: created on an existing store when it is
    # next opened (IF NOT EXISTS), so a store written before them needs no migration. The
    # next assignment number (MAX), the scheduler's instances with work (active ones only),
    # and a process's lease renewal (its own instances only) each read one index range
    # instead of every row.
    "CREATE INDEX IF NOT EXISTS ankka_tasks_by_seq ON ankka_tasks (assigned_seq)",
    "CREATE INDEX IF NOT EXISTS ankka_instances_by_state ON ankka_instances (state, agent, id)",
    "CREATE INDEX IF NOT EXISTS ankka_instances_by_owner ON ankka_instances (lease_owner)",
    # The scheduler's tasks being worked (assigned or running: what ``with_work`` asks for),
    # a partial index, so that question reads those rows and not every task ever written.
    "CREATE INDEX IF NOT EXISTS ankka_tasks_live ON ankka_tasks (agent, instance) "
    f"WHERE state NOT IN {LIVE_EXCLUDED}",
    # Who created each instance (its first assignment's caller); a table of its own, so a
    # store written before it needs no migration (its instances have no creator).
    """CREATE TABLE IF NOT EXISTS ankka_instance_creators (
    agent TEXT NOT NULL,
    id TEXT NOT NULL,
    created_by TEXT NOT NULL,
    PRIMARY KEY (agent, id)
)""",
    # The trace context recorded with each task (tracing on): store/trace_statements.py.
    *trace_statements.SCHEMA,
    # The task tree (delegation): a table of its own, so a store written before it needs
    # no migration (its tasks are roots with no children).
    *TREE_SCHEMA,
)

TASK_COLUMNS = (
    "id, spec, state, budget, instance, own_instance, iterations_used, iteration_started, "
    "started, cancel_requested, usage, result, reason, assigned_seq, version, created_by, "
    "created_at, updated_at"
)


@dataclass(frozen=True, slots=True)
class Ended:
    """A task that reached a final state in one change (the one asked for, or a cascade)."""

    id: str
    agent: str
    instance: str | None
    state: TaskState
    reason: str | None
    woken: tuple[str, str] | None = None  # its parent's instance, told of this end
    # A remote child's end as settled here: its ``end`` (an End, or ``refused``) and
    # ``error`` (``peer_lost``, ``peer_refused``, ...), for its notification.
    told: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Picked:
    task: TaskRecord | None
    waiting: tuple[TaskRecord, ...]


T = TypeVar("T")


def task_from_row(row: Row) -> TaskRecord:
    return TaskRecord(
        id=row[0],
        spec=TaskSpec.from_dict(json.loads(row[1])),
        state=TaskState(row[2]),
        budget=int(row[3]),
        instance=row[4],
        own_instance=bool(row[5]),
        iterations_used=int(row[6]),
        iteration_started=int(row[7]),
        started=bool(row[8]),
        cancel_requested=bool(row[9]),
        usage=Usage.from_dict(json.loads(row[10])),
        result=json.loads(row[11]) if row[11] is not None else None,
        reason=row[12],
        assigned_seq=row[13],
        version=int(row[14]),
        created_by=row[15],
        created_at=datetime.fromisoformat(row[16]),
        updated_at=datetime.fromisoformat(row[17]),
    )


def instance_from_row(row: Row) -> InstanceRecord:
    return InstanceRecord(
        agent=row[0],
        id=row[1],
        state=InstanceState(row[2]),
        own=bool(row[3]),
        created_at=datetime.fromisoformat(row[4]),
        lease_owner=row[5],
        lease_until=row[6],
        created_by=row[7] if len(row) > 7 else None,
    )


class TaskStore(Protocol):
    """Runs one of :mod:`.task_statements`' functions in one transaction, off the event loop,
    and answers what it returned.

    ``write`` serialises writers (one writer at a time across processes); ``serial=False`` is
    for a change of one task's row only (``update``, ``complete_iteration``), which may then
    commit beside other such changes. ``read`` sees the last committed state.
    """

    async def write(self, work: Callable[[Transaction], T], *, serial: bool = True) -> T: ...

    async def read(self, work: Callable[[Transaction], T]) -> T: ...

    @property
    def shared(self) -> bool:
        """True when other processes may work the same store (leases then bound takeover)."""
        ...

    def notices(self) -> NoticeRelay | None:
        """The relay that carries live notifications to the other processes on the store, or
        None when one process uses it."""
        ...


async def create_tables(store: TaskStore, schema: Sequence[str]) -> None:
    """Run a side table's ``CREATE ... IF NOT EXISTS`` statements in one write transaction."""

    def work(tx: Transaction) -> None:
        for statement in schema:
            tx.rows(statement)

    await store.write(work)


class TaskTables:
    """The task tables' view of the store's database (which the Store's opener closes)."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def write(self, work: Callable[[Transaction], T], *, serial: bool = True) -> T:
        return await self.database.write(work, serial=serial)

    async def read(self, work: Callable[[Transaction], T]) -> T:
        return await self.database.read(work)

    @property
    def shared(self) -> bool:
        return self.database.shared

    def notices(self) -> NoticeRelay | None:
        return self.database.notices()
