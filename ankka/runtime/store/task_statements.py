"""The task store's transactions: each function is one transaction's work.

The store's database (:mod:`.sqlite`, :mod:`.postgres`) runs one of these inside a transaction
(``store.tasks.write(lambda tx: put(tx, ...))``), alone or with a journal append
(``journal.commit(session, records, expected=..., then=partial(complete_iteration, ...))``);
the statements are written once, with ``?`` placeholders, for both databases.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from ankka._kernel.errors import NotFound, RequestError
from ankka._kernel.identity import is_platform
from ankka.runtime.declare.policy import NotPermitted
from ankka.runtime.records.delegation import End
from ankka.runtime.records.messages import Usage
from ankka.runtime.records.tasks import (
    FINAL,
    Conflict,
    InstanceRecord,
    InstanceState,
    TaskRecord,
    TaskSpec,
    TaskState,
    cascade,
    next_task,
    own_instance_id,
)
from ankka.runtime.store import tree_statements as tree
from ankka.runtime.store.leases import claim, hold, release, renew
from ankka.runtime.store.readable import EVERYONE, Cursor, Readers, clause
from ankka.runtime.store.tasks import (
    LIVE_EXCLUDED,
    TASK_COLUMNS,
    Ended,
    Picked,
    Transaction,
    instance_from_row,
    task_from_row,
)

__all__ = [
    "Column",
    "add_usage",
    "cancel",
    "claim",
    "complete_iteration",
    "finish",
    "hand_off",
    "get",
    "held",
    "get_instance",
    "pick",
    "put",
    "Readable",
    "queue",
    "read_any",
    "recent",
    "release",
    "renew",
    "set_instance",
    "update",
    "WITH_WORK",
    "WITH_WORK_MARKS",
    "with_work",
    "with_work_marks",
]


def get(tx: Transaction, task: str) -> TaskRecord | None:
    found = tx.rows(f"SELECT {TASK_COLUMNS} FROM ankka_tasks WHERE id = ?", (task,))
    return task_from_row(found[0]) if found else None


def recent(
    tx: Transaction,
    limit: int,
    *,
    who: Readers = EVERYONE,
    after: Cursor | None = None,
    matching: Mapping[str, str] | None = None,
) -> list[TaskRecord]:
    """The tasks ``who`` may read (a condition of the query: issue 31, item 3) whose columns
    equal ``matching`` (``state``, ``agent``, ``type``), newest first: ``limit`` of them older
    than the cursor ``after`` (a task's creation time as ISO text and its id: the console's
    list)."""
    condition, params = clause(who, "created_by", "agent")
    where = [condition]
    if after is not None:
        where.append("(created_at < ? OR (created_at = ? AND id < ?))")
        params += [after[0], after[0], after[1]]
    for column, value in sorted((matching or {}).items()):
        if column not in ("state", "agent", "type"):
            raise ValueError(f"tasks are not listed by {column!r}")
        where.append(f"{column} = ?")
        params.append(value)
    rows = tx.rows(
        f"SELECT {TASK_COLUMNS} FROM ankka_tasks WHERE {' AND '.join(where)} "
        f"ORDER BY created_at DESC, id DESC LIMIT {int(limit)}",
        params,
    )
    return [task_from_row(row) for row in rows]


def get_instance(tx: Transaction, agent: str, instance: str) -> InstanceRecord | None:
    found = tx.rows(
        "SELECT i.agent, i.id, i.state, i.own, i.created_at, i.lease_owner, i.lease_until, "
        "c.created_by FROM ankka_instances i LEFT JOIN ankka_instance_creators c "
        "ON c.agent = i.agent AND c.id = i.id WHERE i.agent = ? AND i.id = ?",
        (agent, instance),
    )
    return instance_from_row(found[0]) if found else None


def held(
    tx: Transaction, agent: str, instance: str, owner: str, until: float
) -> InstanceRecord | None:
    """The instance, its lease renewed until ``until``, if ``owner`` holds it still
    (:func:`~ankka.runtime.store.leases.hold`); None when another process took it."""
    row = hold(tx, agent, instance, owner, until)
    return instance_from_row(row) if row is not None else None


def queue(tx: Transaction, agent: str, instance: str) -> list[TaskRecord]:
    rows = tx.rows(
        f"SELECT {TASK_COLUMNS} FROM ankka_tasks WHERE agent = ? AND instance = ? "
        "AND state NOT IN ('completed', 'failed', 'cancelled') ORDER BY assigned_seq, id",
        (agent, instance),
    )
    return [task_from_row(r) for r in rows]


def _states(tx: Transaction, ids: Sequence[str]) -> dict[str, TaskState]:
    states: dict[str, TaskState] = {}
    for start in range(0, len(ids), 200):
        chunk = list(ids[start : start + 200])
        marks = ", ".join("?" for _ in chunk)
        for task, state in tx.rows(
            f"SELECT id, state FROM ankka_tasks WHERE id IN ({marks})", chunk
        ):
            states[task] = TaskState(state)
    return states


Readable = Callable[[str, str], bool]
"""Whether the caller may read a task that (creator, agent) names."""


def read_any(creator: str, agent: str) -> bool:
    """:data:`Readable` of the platform, which may read every task."""
    return True


def _readable(tx: Transaction, ids: Sequence[str], may_read: Readable) -> set[str]:
    """Those of ``ids`` that exist and the caller may read."""
    found: set[str] = set()
    for start in range(0, len(ids), 200):
        chunk = list(ids[start : start + 200])
        marks = ", ".join("?" for _ in chunk)
        for task, creator, agent in tx.rows(
            f"SELECT id, created_by, agent FROM ankka_tasks WHERE id IN ({marks})", chunk
        ):
            if may_read(str(creator), str(agent)):
                found.add(str(task))
    return found


def pick(tx: Transaction, agent: str, instance: str) -> Picked:
    unfinished = queue(tx, agent, instance)
    needed = sorted({d for t in unfinished for d in t.spec.depends_on})
    chosen, waiting = next_task(unfinished, _states(tx, needed))
    return Picked(chosen, waiting)


def put(
    tx: Transaction,
    task: str,
    spec: TaskSpec,
    *,
    instance: str | None,
    budget: int,
    created_by: str,
    may_read: Readable,
    now: datetime,
    tokens: int | None = None,
) -> tuple[TaskRecord, bool, list[Ended]]:
    """Create ``task`` (or find it, when the same body was sent before) with ``budget``
    iterations and, when given, ``tokens`` for its tree. A spec naming a parent of another
    runtime's (``spec.lineage``) starts a tree row of its own, as does a token budget.
    ``may_read`` says whether ``created_by`` may read a task its creator created for an
    agent: every dependency must be one (:mod:`ankka.runtime.declare.policy`)."""
    existing = get(tx, task)
    if existing is not None:
        return _again(tx, existing, spec, instance, now, created_by)
    # A task another caller may not read is answered exactly as a missing one: naming it
    # neither reaches its result nor tells whether it exists (issue 31, item 1).
    missing = sorted(set(spec.depends_on) - _readable(tx, spec.depends_on, may_read))
    if missing:
        raise RequestError(
            f"task {task!r} depends on {', '.join(repr(m) for m in missing)}, which "
            "does not exist or is not the caller's to read; create the tasks it depends on "
            "first, or name tasks the caller may read"
        )
    own = instance is None
    where = own_instance_id(task) if own else instance
    assert where is not None
    _ensure_instance(tx, spec.agent, where, own=own, now=now, created_by=created_by)
    stamp = now.isoformat()
    tx.rows(
        f"INSERT INTO ankka_tasks ({TASK_COLUMNS}, agent, type, digest) VALUES "
        "(?, ?, ?, ?, ?, ?, 0, 0, 0, 0, ?, NULL, NULL, ?, 1, ?, ?, ?, ?, ?, ?)",
        (
            task,
            json.dumps(spec.as_dict(), ensure_ascii=False),
            TaskState.ASSIGNED.value,
            budget,
            where,
            int(own),
            json.dumps(Usage().as_dict()),
            _next_seq(tx),
            created_by,
            stamp,
            stamp,
            spec.agent,
            spec.type,
            spec.digest(),
        ),
    )
    for dependency in spec.depends_on:
        tx.rows("INSERT INTO ankka_task_deps (task, depends_on) VALUES (?, ?)", (task, dependency))
    ended: list[Ended] = []
    if tokens is not None or spec.lineage:
        made = get(tx, task)
        assert made is not None
        tree.ensure_root(tx, made, token_budget=tokens, lineage=spec.lineage)
    states = _states(tx, spec.depends_on)
    gone = [d for d in spec.depends_on if states[d] in (TaskState.FAILED, TaskState.CANCELLED)]
    if gone:
        reason = f"its dependency {gone[0]!r} was {states[gone[0]].value}"
        ended = finish(tx, task, TaskState.CANCELLED, reason=reason, now=now)
    record = get(tx, task)
    assert record is not None
    return record, True, ended


def _again(
    tx: Transaction,
    existing: TaskRecord,
    spec: TaskSpec,
    instance: str | None,
    now: datetime,
    created_by: str,
) -> tuple[TaskRecord, bool, list[Ended]]:
    if existing.spec.digest() != spec.digest() and not _created_as(tx, existing.id, spec):
        raise Conflict(
            f"task {existing.id!r} already exists with a different body (agent, type, "
            "instructions, attachments or depends_on); a task id names one task for good"
        )
    if instance is None or instance == existing.instance:
        return existing, False, []
    if existing.state != TaskState.PENDING:
        raise Conflict(
            f"task {existing.id!r} is assigned to instance {existing.instance!r}; it can "
            f"be assigned to {instance!r} only once it is pending again"
        )
    _ensure_instance(tx, spec.agent, instance, own=False, now=now, created_by=created_by)
    tx.rows(
        "UPDATE ankka_tasks SET state = ?, instance = ?, own_instance = 0, "
        "assigned_seq = ?, version = version + 1, updated_at = ? WHERE id = ?",
        (
            TaskState.ASSIGNED.value,
            instance,
            _next_seq(tx),
            now.isoformat(),
            existing.id,
        ),
    )
    record = get(tx, existing.id)
    assert record is not None
    return record, False, []


def _created_as(tx: Transaction, task: str, spec: TaskSpec) -> bool:
    """Whether ``task`` was created with ``spec`` (its body when it was created: a task
    handed on to another agent since is still the one its creator sent)."""
    found = tx.rows("SELECT digest FROM ankka_tasks WHERE id = ?", (task,))
    return bool(found) and found[0][0] == spec.digest()


def hand_off(
    tx: Transaction, task: str, *, to: str, note: str, now: datetime
) -> tuple[TaskRecord, TaskRecord] | None:
    """Give ``task`` to agent ``to`` (docs/delegation.md, "Handoff"): it keeps its id, its
    session, its iterations used and its budget, and is assigned to an instance of its own
    of ``to``'s; the first agent's instance moves on (its own instance ends). The task's
    tree row lists the handoff. The task as it was and as it is now, or None when it has
    ended or is ``to``'s already (a handoff recorded before a restart)."""
    current = get(tx, task)
    if current is None or current.final or current.spec.agent == to:
        return None
    if current.own_instance and current.instance is not None:
        _end_instance(tx, current.spec.agent, current.instance)
    where = own_instance_id(task)
    _ensure_instance(tx, to, where, own=True, now=now, created_by=current.created_by)
    moved = replace(current.spec, agent=to)
    tx.rows(
        "UPDATE ankka_tasks SET agent = ?, spec = ?, state = ?, instance = ?, own_instance = 1, "
        "assigned_seq = ?, version = version + 1, updated_at = ? WHERE id = ?",
        (
            to,
            json.dumps(moved.as_dict(), ensure_ascii=False),
            TaskState.ASSIGNED.value,
            where,
            _next_seq(tx),
            now.isoformat(),
            task,
        ),
    )
    handoff = {"from": current.spec.agent, "to": to, "at": now.isoformat(), "note": note}
    tree.handed_off(tx, current, handoff)
    record = get(tx, task)
    assert record is not None
    return current, record


def _next_seq(tx: Transaction) -> int:
    row = tx.rows("SELECT COALESCE(MAX(assigned_seq), 0) FROM ankka_tasks")
    return int(row[0][0]) + 1


def _ensure_instance(
    tx: Transaction, agent: str, instance: str, *, own: bool, now: datetime, created_by: str
) -> None:
    found = get_instance(tx, agent, instance)
    if found is not None and not _may_use(found, created_by):
        # Checked in the transaction that assigns: of two callers claiming one new instance
        # at once, the second finds the first's (issue 31, item 2).
        raise NotPermitted(
            f"caller {created_by!r} may not give work to instance {instance!r} of agent "
            f"{agent!r}: it is another caller's; name an instance of your own"
        )
    if found is None:
        tx.rows(
            "INSERT INTO ankka_instances (agent, id, state, own, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (agent, instance, InstanceState.ACTIVE.value, int(own), now.isoformat()),
        )
        tx.rows(
            "INSERT INTO ankka_instance_creators (agent, id, created_by) VALUES (?, ?, ?)",
            (agent, instance, created_by),
        )
    elif found.state in (InstanceState.TERMINATED, InstanceState.ENDED):
        raise Conflict(
            f"instance {instance!r} of agent {agent!r} was {found.state.value}; an "
            "instance id is never used again, name a new one"
        )


def _may_use(found: InstanceRecord, caller: str) -> bool:
    """Whether ``caller`` may assign work to ``found``: its creator and the platform may (an
    instance from a store older than its creator record is checked by the HTTP layer)."""
    creator = found.created_by
    return creator is None or creator == caller or is_platform(caller)


# A value a task's column takes (text, a number, a flag as 0/1, or NULL).
Column = str | int | float | None


def update(tx: Transaction, task: str, now: datetime, **changes: Column) -> TaskRecord | None:
    """Change an unfinished task; a final task is left as it is (and None returned). The
    changed row comes back with the update (one statement, not a second read)."""
    sets = ", ".join(f"{column} = ?" for column in changes)
    found = tx.rows(
        f"UPDATE ankka_tasks SET {sets}, version = version + 1, updated_at = ? "
        "WHERE id = ? AND state NOT IN ('completed', 'failed', 'cancelled') "
        f"RETURNING {TASK_COLUMNS}",
        (*changes.values(), now.isoformat(), task),
    )
    return task_from_row(found[0]) if found else None


def complete_iteration(
    tx: Transaction, task: str, number: int, usage: Usage, now: datetime
) -> TaskRecord | None:
    """Record iteration ``number`` completed and add its usage, once: a repeated record
    of the same iteration (after a restart) changes nothing. The usage joins the task's tree
    and every ancestor's in the same transaction. A task ended meanwhile (by its parent, or
    a deadline) still counts what its call spent; the record answered is then final."""
    current = get(tx, task)
    if current is None or current.iterations_used >= number:
        return current
    total = current.usage + usage
    tree.spent(tx, task, number - current.iterations_used, usage, late=current.final)
    if current.final:
        found = tx.rows(
            "UPDATE ankka_tasks SET iterations_used = ?, usage = ?, version = version + 1, "
            f"updated_at = ? WHERE id = ? RETURNING {TASK_COLUMNS}",
            (number, json.dumps(total.as_dict()), now.isoformat(), task),
        )
        return task_from_row(found[0]) if found else None
    return update(
        tx,
        task,
        now,
        iterations_used=number,
        iteration_started=max(number, current.iteration_started),
        usage=json.dumps(total.as_dict()),
    )


def add_usage(tx: Transaction, task: str, usage: Usage, now: datetime) -> TaskRecord | None:
    """Add tokens spent outside the iterations' model calls (judged guardrails)."""
    current = get(tx, task)
    if current is None or current.final:
        return None
    total = current.usage + usage
    tree.spent(tx, task, 0, usage)
    return update(tx, task, now, usage=json.dumps(total.as_dict()))


def finish(
    tx: Transaction,
    task: str,
    state: TaskState,
    *,
    now: datetime,
    result: dict[str, Any] | None = None,
    reason: str | None = None,
    end: End | None = None,
) -> list[Ended]:
    """End ``task`` as ``state`` (``end`` saying how, when more than the state says) and, in
    this transaction: tell its parent (settling what it was given), end its children that
    have not ended (a child never outlives its parent) and, when it failed or was
    cancelled, cancel every task depending on it at any depth."""
    assert state in FINAL
    current = get(tx, task)
    if current is None or current.final:
        return []
    encoded = json.dumps(result, ensure_ascii=False) if result is not None else None
    update(tx, task, now, state=state.value, result=encoded, reason=reason)
    how = end or End(state.value)
    final = replace(current, state=state)
    ending = tree.ended(tx, final, how, result=result, reason=reason)
    ended = [Ended(task, current.spec.agent, current.instance, state, reason, ending.woken)]
    if current.own_instance and current.instance is not None:
        _end_instance(tx, current.spec.agent, current.instance)
    for child in ending.cancel:
        why = f"its parent {task!r} ended ({how.value})"
        ended += finish(tx, child, TaskState.CANCELLED, reason=why, now=now)
    if state == TaskState.COMPLETED:
        return ended
    dependants: dict[str, list[str]] = {}
    frontier = [task]
    while frontier:  # the dependency graph below ``task``, level by level
        marks = ", ".join("?" for _ in frontier)
        rows = tx.rows(
            f"SELECT depends_on, task FROM ankka_task_deps WHERE depends_on IN ({marks})",
            frontier,
        )
        frontier = []
        for parent, child in rows:
            if child not in dependants:
                frontier.append(child)
            dependants.setdefault(parent, []).append(child)
            dependants.setdefault(child, [])
    states = _states(tx, sorted(dependants))
    for dependant in cascade(task, dependants, states):
        why = f"it depends on {task!r}, which was {state.value}"
        record = get(tx, dependant)
        assert record is not None
        update(tx, dependant, now, state=TaskState.CANCELLED.value, reason=why)
        ended.append(Ended(dependant, record.spec.agent, record.instance, TaskState.CANCELLED, why))
        if record.own_instance and record.instance is not None:
            _end_instance(tx, record.spec.agent, record.instance)
    return ended


def _end_instance(tx: Transaction, agent: str, instance: str) -> None:
    tx.rows(
        "UPDATE ankka_instances SET state = ?, lease_owner = NULL, lease_until = NULL "
        "WHERE agent = ? AND id = ?",
        (InstanceState.ENDED.value, agent, instance),
    )


def cancel(tx: Transaction, task: str, now: datetime) -> tuple[TaskRecord, list[Ended]]:
    """Cancel ``task``: at once when no iteration can be in progress, else ask its
    instance to stop at the end of the iteration it is in."""
    current = get(tx, task)
    if current is None:
        raise _no_task(task)
    if current.final:
        return current, []
    working = current.state in (TaskState.IN_PROGRESS, TaskState.RESULT_REJECTED)
    holder = get_instance(tx, current.spec.agent, current.instance) if current.instance else None
    if working and holder is not None and holder.state == InstanceState.ACTIVE:
        updated = update(tx, task, now, cancel_requested=1)
        return updated or current, []
    ended = finish(tx, task, TaskState.CANCELLED, reason="cancelled", now=now)
    record = get(tx, task)
    assert record is not None
    return record, ended


def set_instance(
    tx: Transaction, agent: str, instance: str, state: InstanceState, now: datetime
) -> InstanceRecord:
    found = get_instance(tx, agent, instance)
    if found is None:
        raise _no_instance(agent, instance)
    if found.state in (InstanceState.TERMINATED, InstanceState.ENDED):
        if found.state == state:
            return found
        raise Conflict(f"instance {instance!r} of agent {agent!r} was {found.state.value}")
    tx.rows(
        "UPDATE ankka_instances SET state = ? WHERE agent = ? AND id = ?",
        (state.value, agent, instance),
    )
    if state == InstanceState.TERMINATED:
        for record in queue(tx, agent, instance):
            update(
                tx,
                record.id,
                now,
                state=TaskState.PENDING.value,
                instance=None,
                own_instance=0,
                assigned_seq=None,
            )
    return replace(found, state=state)


WITH_WORK = (
    "SELECT i.agent, i.id FROM ankka_instances i WHERE i.state = 'active' AND EXISTS ("
    "SELECT 1 FROM ankka_tasks t WHERE t.agent = i.agent AND t.instance = i.id "
    f"AND t.state NOT IN {LIVE_EXCLUDED}) ORDER BY i.agent, i.id"
)


def with_work(tx: Transaction) -> list[tuple[str, str]]:
    """Active instances with a task assigned or running, in (agent, instance) order. The tasks
    side reads the partial index ``ankka_tasks_live`` (only tasks being worked), never the
    whole table."""
    rows = tx.rows(WITH_WORK)
    return [(r[0], r[1]) for r in rows]


# The same instances as ``WITH_WORK``, each with its mark: the greatest version of its tasks
# being worked (``tree_statements.mark``). A task's row changes when something happens to it
# (a child's end changes its parent's), so a scheduler keeping an instance idle at one mark
# takes it up again when the mark moves, whichever process made the change.
WITH_WORK_MARKS = (
    "SELECT t.agent, t.instance, MAX(t.version) FROM ankka_tasks t "
    f"WHERE t.state NOT IN {LIVE_EXCLUDED} AND EXISTS (SELECT 1 FROM ankka_instances i "
    "WHERE i.agent = t.agent AND i.id = t.instance AND i.state = 'active') "
    "GROUP BY t.agent, t.instance ORDER BY t.agent, t.instance"
)


def with_work_marks(tx: Transaction) -> list[tuple[tuple[str, str], int]]:
    """:func:`with_work`, each instance with its mark; reads ``ankka_tasks_live`` too."""
    return [((r[0], r[1]), int(r[2])) for r in tx.rows(WITH_WORK_MARKS)]


def _no_task(task: str) -> RequestError:
    return NotFound(f"there is no task {task!r}")


def _no_instance(agent: str, instance: str) -> RequestError:
    return NotFound(f"agent {agent!r} has no instance {instance!r}")
