"""The task tree's table and statements: who delegated to whom, what each was given of its
parent's budget, what each tree spent, and what each parent is told of each child.

One row per task in a tree (``ankka_task_tree``): a child, a task that made children, or a
task with a token budget. A task with no row is a root with no children and no token budget
(every task of a store written before delegation). The rows are changed only inside the
task store's transactions, beside the task rows they go with (:mod:`.task_statements` calls
:func:`spent` from ``complete_iteration`` and :func:`ended` from ``finish``), so a tree's
numbers move with its tasks' in one commit:

- ``claimed_iterations`` / ``claimed_tokens``: what is taken from the task's budget: its own
  spend, plus per child the grant while it works and its tree's spend once it ended;
- ``tree_*``: the task's own spend plus every descendant's, added in the transaction that
  records each iteration (once: the iteration's number guards it);
- ``outcome``: what the parent is told (set once: the child's end, or its deadline);
  ``settled``: the child's end is counted in the parent's claims (once).

Written once, with ``?`` placeholders, for SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ankka.runtime.records.delegation import (
    Budget,
    ChildOutcome,
    Claims,
    End,
    Grant,
    TreeView,
    outcome_of_end,
    settled,
    tokens_of,
)
from ankka.runtime.records.messages import Usage
from ankka.runtime.records.tasks import TaskRecord, TaskState
from ankka.runtime.store.database import AddedColumn, SchemaStep

__all__ = [
    "TREE_SCHEMA",
    "Ending",
    "TreeRow",
    "cancel_sent",
    "cancels_owed",
    "children",
    "due",
    "ended",
    "handed_off",
    "ensure_root",
    "insert_child",
    "mark",
    "release_grant",
    "remote_ended",
    "row",
    "set_outcome",
    "spent",
    "view",
]

TREE_SCHEMA: tuple[SchemaStep, ...] = (
    """CREATE TABLE IF NOT EXISTS ankka_task_tree (
    task TEXT PRIMARY KEY,
    parent TEXT,
    origin TEXT,
    root TEXT NOT NULL,
    depth INTEGER NOT NULL,
    lineage TEXT NOT NULL,
    ancestors TEXT NOT NULL,
    call TEXT,
    seq INTEGER NOT NULL,
    agent TEXT NOT NULL,
    remote TEXT,
    deadline_at DOUBLE PRECISION,
    deadline_seconds DOUBLE PRECISION,
    token_budget BIGINT,
    grant_iterations INTEGER NOT NULL,
    grant_tokens BIGINT,
    grant_from_parent INTEGER NOT NULL,
    claimed_iterations INTEGER NOT NULL,
    claimed_tokens BIGINT NOT NULL,
    children INTEGER NOT NULL,
    tree_iterations INTEGER NOT NULL,
    tree_input BIGINT NOT NULL,
    tree_output BIGINT NOT NULL,
    tree_cache_read BIGINT NOT NULL,
    tree_cache_write BIGINT NOT NULL,
    end_kind TEXT,
    outcome TEXT,
    settled INTEGER NOT NULL,
    cancel_sent INTEGER NOT NULL,
    handoffs TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS ankka_task_tree_by_parent ON ankka_task_tree (parent, seq)",
    # The scheduler's question each poll: which children are past their deadline. Only
    # children still waiting for an outcome are in it.
    "CREATE INDEX IF NOT EXISTS ankka_task_tree_due ON ankka_task_tree (deadline_at) "
    "WHERE outcome IS NULL AND deadline_at IS NOT NULL",
    # The body that creates each remote child at its peer, whether the peer answered its
    # PUT with the child, and the spend the peer last reported (store/remote_statements.py).
    """CREATE TABLE IF NOT EXISTS ankka_remote_children (
    task TEXT PRIMARY KEY,
    peer TEXT NOT NULL,
    body TEXT NOT NULL,
    created INTEGER NOT NULL DEFAULT 0,
    reported TEXT
)""",
    # ``created`` and ``reported`` came after the table: a store written before them gains
    # them (its children as not known to be made, with no spend reported: what the runtime
    # that wrote them could tell).
    AddedColumn("ankka_remote_children", "created", "INTEGER NOT NULL DEFAULT 0"),
    AddedColumn("ankka_remote_children", "reported", "TEXT"),
    # Which A2A task each child delegated to a remote A2A agent became (the client's ledger).
    """CREATE TABLE IF NOT EXISTS ankka_remote_a2a (
    key TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    context TEXT NOT NULL
)""",
)

_COLUMNS = (
    "task, parent, origin, root, depth, lineage, ancestors, call, seq, agent, remote, "
    "deadline_at, deadline_seconds, token_budget, grant_iterations, grant_tokens, "
    "grant_from_parent, "
    "claimed_iterations, claimed_tokens, children, tree_iterations, tree_input, tree_output, "
    "tree_cache_read, tree_cache_write, end_kind, outcome, settled, cancel_sent, handoffs"
)
_FINAL = "('completed', 'failed', 'cancelled')"


class Tx(Protocol):
    """The task store's transaction (:class:`ankka.runtime.store.tasks.Transaction`, which
    builds its schema from :data:`TREE_SCHEMA`, so this module cannot import it)."""

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...


@dataclass(frozen=True, slots=True)
class TreeRow:
    task: str
    parent: str | None
    origin: str | None
    root: str
    depth: int
    lineage: tuple[str, ...]
    ancestors: tuple[str, ...]
    call: str | None
    seq: int
    agent: str
    remote: str | None
    deadline_at: float | None
    deadline_seconds: float | None
    token_budget: int | None
    grant: Grant
    claims: Claims
    children: int
    tree_iterations: int
    tree_usage: Usage
    end: str | None
    outcome: ChildOutcome | None
    settled: bool
    cancel_sent: bool
    handoffs: tuple[dict[str, Any], ...] = ()

    def budget(self, iterations: int) -> Budget:
        return Budget(iterations, self.token_budget)


def _from_row(r: tuple[Any, ...]) -> TreeRow:
    return TreeRow(
        task=r[0],
        parent=r[1],
        origin=r[2],
        root=r[3],
        depth=int(r[4]),
        lineage=tuple(json.loads(r[5])),
        ancestors=tuple(json.loads(r[6])),
        call=r[7],
        seq=int(r[8]),
        agent=r[9],
        remote=r[10],
        deadline_at=r[11],
        deadline_seconds=r[12],
        token_budget=None if r[13] is None else int(r[13]),
        grant=Grant(int(r[14]), None if r[15] is None else int(r[15]), bool(r[16])),
        claims=Claims(int(r[17]), int(r[18])),
        children=int(r[19]),
        tree_iterations=int(r[20]),
        tree_usage=Usage(int(r[21]), int(r[22]), int(r[23]), int(r[24])),
        end=r[25],
        outcome=ChildOutcome.from_dict(json.loads(r[26])) if r[26] is not None else None,
        settled=bool(r[27]),
        cancel_sent=bool(r[28]),
        handoffs=tuple(json.loads(r[29])),
    )


def row(tx: Tx, task: str) -> TreeRow | None:
    found = tx.rows(f"SELECT {_COLUMNS} FROM ankka_task_tree WHERE task = ?", (task,))
    return _from_row(found[0]) if found else None


def children(tx: Tx, parent: str) -> list[TreeRow]:
    """``parent``'s children, in the order they were made."""
    rows = tx.rows(
        f"SELECT {_COLUMNS} FROM ankka_task_tree WHERE parent = ? ORDER BY seq", (parent,)
    )
    return [_from_row(r) for r in rows]


def _insert(tx: Tx, values: dict[str, Any]) -> None:
    names = _COLUMNS.split(", ")
    marks = ", ".join("?" for _ in names)
    tx.rows(
        f"INSERT INTO ankka_task_tree ({_COLUMNS}) VALUES ({marks})",
        [values[name] for name in names],
    )


def _fresh(task: str, agent: str) -> dict[str, Any]:
    return {
        "task": task, "parent": None, "origin": None, "root": task, "depth": 0,
        "lineage": json.dumps([agent]), "ancestors": "[]", "call": None, "seq": 0,
        "agent": agent, "remote": None, "deadline_at": None, "deadline_seconds": None,
        "token_budget": None,
        "grant_iterations": 0, "grant_tokens": None, "grant_from_parent": 0,
        "claimed_iterations": 0, "claimed_tokens": 0, "children": 0, "tree_iterations": 0,
        "tree_input": 0, "tree_output": 0, "tree_cache_read": 0, "tree_cache_write": 0,
        "end_kind": None, "outcome": None, "settled": 0, "cancel_sent": 0, "handoffs": "[]",
    }  # fmt: skip


def ensure_root(
    tx: Tx,
    record: TaskRecord,
    *,
    token_budget: int | None = None,
    lineage: Sequence[str] = (),
) -> TreeRow:
    """``record``'s row, made when it has none: a root (or, when ``lineage`` is given, the
    child of another runtime's task, ``record.spec.parent``), its claims and tree totals its
    own spend so far."""
    found = row(tx, record.id)
    if found is not None:
        return found
    usage = record.usage
    values = _fresh(record.id, record.spec.agent)
    values.update(
        token_budget=token_budget,
        claimed_iterations=record.iterations_used,
        claimed_tokens=tokens_of(usage),
        tree_iterations=record.iterations_used,
        tree_input=usage.input_tokens,
        tree_output=usage.output_tokens,
        tree_cache_read=usage.cache_read_tokens,
        tree_cache_write=usage.cache_write_tokens,
    )
    if lineage:
        values.update(
            origin=record.spec.parent,
            depth=len(lineage),
            lineage=json.dumps([*lineage, record.spec.agent]),
        )
    _insert(tx, values)
    made = row(tx, record.id)
    assert made is not None
    return made


def insert_child(
    tx: Tx,
    parent: TreeRow,
    *,
    task: str,
    agent: str,
    call: str,
    given: Grant,
    deadline_at: float | None,
    deadline_seconds: float | None = None,
    remote: str | None = None,
) -> TreeRow:
    """Record ``task`` as ``parent``'s next child, given ``given``; the parent's claims rise
    by the grant (its tokens only when they came from the parent's budget)."""
    values = _fresh(task, agent)
    values.update(
        parent=parent.task,
        root=parent.root,
        depth=parent.depth + 1,
        lineage=json.dumps([*parent.lineage, agent]),
        ancestors=json.dumps([*parent.ancestors, parent.task]),
        call=call,
        seq=parent.children,
        remote=remote,
        deadline_at=deadline_at,
        deadline_seconds=deadline_seconds,
        token_budget=given.tokens,
        grant_iterations=given.iterations,
        grant_tokens=given.tokens,
        grant_from_parent=int(given.from_parent),
    )
    _insert(tx, values)
    tokens = given.tokens if given.from_parent and given.tokens is not None else 0
    tx.rows(
        "UPDATE ankka_task_tree SET claimed_iterations = claimed_iterations + ?, "
        "claimed_tokens = claimed_tokens + ?, children = children + 1 WHERE task = ?",
        (given.iterations, tokens, parent.task),
    )
    made = row(tx, task)
    assert made is not None
    return made


def _add_to_trees(tx: Tx, tasks: Sequence[str], iterations: int, usage: Usage) -> None:
    if not tasks:
        return
    marks = ", ".join("?" for _ in tasks)
    tx.rows(
        "UPDATE ankka_task_tree SET tree_iterations = tree_iterations + ?, "
        "tree_input = tree_input + ?, tree_output = tree_output + ?, "
        "tree_cache_read = tree_cache_read + ?, tree_cache_write = tree_cache_write + ? "
        f"WHERE task IN ({marks})",
        (
            iterations,
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            *tasks,
        ),
    )


def spent(tx: Tx, task: str, iterations: int, usage: Usage, *, late: bool = False) -> None:
    """``task`` spent ``iterations`` and ``usage`` (called once per spend, in the transaction
    that adds it to the task's own record): its claims rise, unless it had already ended
    (``late``: a call in flight when it was ended, whose end is settled already), and so do
    its tree totals and every ancestor's."""
    found = row(tx, task)
    if found is None:
        return
    if not late:
        tx.rows(
            "UPDATE ankka_task_tree SET claimed_iterations = claimed_iterations + ?, "
            "claimed_tokens = claimed_tokens + ? WHERE task = ?",
            (iterations, tokens_of(usage), task),
        )
    _add_to_trees(tx, (task, *found.ancestors), iterations, usage)


def _outcome_json(outcome: ChildOutcome) -> str:
    return json.dumps(outcome.as_dict(), ensure_ascii=False)


Key = tuple[str, str]  # an instance: (agent, instance id)


def _wake(tx: Tx, parent: str) -> Key | None:
    """Change ``parent``'s row (its version): its instance's mark rises, which wakes it in
    whichever process's scheduler sees it idle. Its instance, or None when it has ended."""
    found = tx.rows(
        f"UPDATE ankka_tasks SET version = version + 1 WHERE id = ? AND state NOT IN {_FINAL} "
        "RETURNING agent, instance",
        (parent,),
    )
    if not found or found[0][1] is None:
        return None
    return str(found[0][0]), str(found[0][1])


def _settle(
    tx: Tx, child: TreeRow, iterations: int, tokens: int, outcome: ChildOutcome
) -> Key | None:
    """Count ``child``'s end in its parent's claims and tell the parent (once each); the
    parent is woken (its instance is answered)."""
    assert child.parent is not None
    delta = settled(child.grant, iterations, tokens)
    tx.rows(
        "UPDATE ankka_task_tree SET claimed_iterations = claimed_iterations + ?, "
        "claimed_tokens = claimed_tokens + ? WHERE task = ?",
        (delta.iterations, delta.tokens, child.parent),
    )
    tx.rows(
        "UPDATE ankka_task_tree SET settled = 1, outcome = COALESCE(outcome, ?) WHERE task = ?",
        (_outcome_json(outcome), child.task),
    )
    return _wake(tx, child.parent)


@dataclass(frozen=True, slots=True)
class Ending:
    """What a task's end does to its tree: the parent to wake (None: none here), the local
    children to end with it (the caller ends each, in the same transaction), and the remote
    children whose cancel is now owed."""

    woken: Key | None
    cancel: tuple[str, ...]
    remote: tuple[str, ...]


def ended(
    tx: Tx,
    record: TaskRecord,
    end: End,
    *,
    result: dict[str, Any] | None = None,
    reason: str | None = None,
) -> Ending:
    """``record`` has just ended ``end`` (in this transaction): its end kind is kept, its
    parent told and its claims settled (once), and its children that have not ended are named
    to be ended with it: a child never outlives its parent."""
    found = row(tx, record.id)
    if found is None:
        if end in (End.COMPLETED, End.FAILED, End.CANCELLED):
            return Ending(None, (), ())
        found = ensure_root(tx, record)
    tx.rows("UPDATE ankka_task_tree SET end_kind = ? WHERE task = ?", (end.value, record.id))
    woken: Key | None = None
    if found.parent is not None and not found.settled:
        outcome = outcome_of_end(
            end, task=record.id, agent=record.spec.agent, result=result, reason=reason
        )
        woken = _settle(tx, found, found.tree_iterations, tokens_of(found.tree_usage), outcome)
    local: list[str] = []
    remote: list[str] = []
    for child in children(tx, record.id):
        if child.outcome is not None and child.settled:
            continue
        if child.remote is None:
            local.append(child.task)
        else:
            remote.append(child.task)
            why = f"its parent {record.id!r} ended ({end.value})"
            gone = outcome_of_end(End.CANCELLED, task=child.task, agent=child.agent, reason=why)
            tx.rows(
                "UPDATE ankka_task_tree SET outcome = COALESCE(outcome, ?) WHERE task = ?",
                (_outcome_json(gone), child.task),
            )
    return Ending(woken, tuple(local), tuple(remote))


def remote_ended(
    tx: Tx,
    child: str,
    outcome: ChildOutcome,
    *,
    iterations: int,
    usage: Usage,
) -> Key | None:
    """A remote child ended (its runtime said so) having spent ``iterations`` and ``usage``
    over its tree: its totals join every ancestor's, its end is settled in its parent's claims
    and told to the parent, once. The parent to wake, or None when it was settled before."""
    found = row(tx, child)
    if found is None or found.settled:
        return None
    _add_to_trees(tx, (child, *found.ancestors), iterations, usage)
    tx.rows("UPDATE ankka_task_tree SET end_kind = ? WHERE task = ?", (outcome.status, child))
    return _settle(tx, found, iterations, tokens_of(usage), outcome)


def handed_off(tx: Tx, record: TaskRecord, handoff: dict[str, Any]) -> None:
    """``record`` (as it was) is handed on (``handoff``: ``from``, ``to``, ``at``, ``note``):
    its row lists it, and the last agent of its chain is the one working it now."""
    found = ensure_root(tx, record)
    lineage = [*found.lineage[:-1], str(handoff["to"])]
    tx.rows(
        "UPDATE ankka_task_tree SET agent = ?, lineage = ?, handoffs = ? WHERE task = ?",
        (
            handoff["to"],
            json.dumps(lineage),
            json.dumps([*found.handoffs, handoff], ensure_ascii=False),
            record.id,
        ),
    )


def set_outcome(tx: Tx, child: str, outcome: ChildOutcome) -> Key | None:
    """Tell ``child``'s parent ``outcome`` now (a remote child past its deadline), unless it
    was told before; its claims are settled when the child's spend is known. The parent to
    wake, or None."""
    changed = tx.rows(
        "UPDATE ankka_task_tree SET outcome = ? WHERE task = ? AND outcome IS NULL "
        "RETURNING parent",
        (_outcome_json(outcome), child),
    )
    if not changed or changed[0][0] is None:
        return None
    return _wake(tx, str(changed[0][0]))


def release_grant(tx: Tx, child: str) -> None:
    """Give ``child``'s grant back to its parent now (a remote child told an end before its
    runtime said what it spent): the parent's claims drop by it and the child's row holds no
    grant, so its spend, once known, is added to the claims as it is (its settlement)."""
    found = row(tx, child)
    if found is None or found.parent is None or found.settled:
        return
    delta = settled(found.grant, 0, 0)
    tx.rows(
        "UPDATE ankka_task_tree SET claimed_iterations = claimed_iterations + ?, "
        "claimed_tokens = claimed_tokens + ? WHERE task = ?",
        (delta.iterations, delta.tokens, found.parent),
    )
    tx.rows(
        "UPDATE ankka_task_tree SET grant_iterations = 0, grant_tokens = CASE WHEN "
        "grant_tokens IS NULL THEN NULL ELSE 0 END WHERE task = ?",
        (child,),
    )


def due(tx: Tx, now: float, limit: int = 100) -> list[TreeRow]:
    """Children past their deadline with no outcome yet, the earliest first."""
    rows = tx.rows(
        f"SELECT {_COLUMNS} FROM ankka_task_tree WHERE outcome IS NULL AND deadline_at IS NOT "
        "NULL AND deadline_at <= ? ORDER BY deadline_at LIMIT ?",
        (now, limit),
    )
    return [_from_row(r) for r in rows]


def cancels_owed(tx: Tx, limit: int = 100) -> list[TreeRow]:
    """Remote children whose parent ended (or whose deadline passed) and whose cancel has not
    been sent to their runtime yet."""
    rows = tx.rows(
        f"SELECT {_COLUMNS} FROM ankka_task_tree WHERE remote IS NOT NULL AND outcome IS NOT "
        "NULL AND settled = 0 AND cancel_sent = 0 LIMIT ?",
        (limit,),
    )
    return [_from_row(r) for r in rows]


def cancel_sent(tx: Tx, child: str) -> None:
    tx.rows("UPDATE ankka_task_tree SET cancel_sent = 1 WHERE task = ?", (child,))


def mark(tx: Tx, agent: str, instance: str) -> int:
    """An instance's mark: the greatest version of its tasks being worked (as
    ``task_statements.WITH_WORK_MARKS`` reads it, the two spelling the states alike). It rises
    whenever
    one of them changes (a child's end changes its parent's row), so a scheduler that saw an
    instance idle at one mark knows to look again at another."""
    found = tx.rows(
        "SELECT COALESCE(MAX(version), 0) FROM ankka_tasks WHERE agent = ? AND instance = ? "
        "AND state NOT IN ('completed', 'failed', 'cancelled', 'pending')",
        (agent, instance),
    )
    return int(found[0][0])


def view(tx: Tx, record: TaskRecord) -> TreeView:
    """``record``'s place in its tree, as its record shows it."""
    found = row(tx, record.id)
    default_end = record.state.value if record.state in _ENDS else None
    if found is None:
        return TreeView(
            parent=record.spec.parent,
            tree_usage=record.usage,
            tree_iterations=record.iterations_used,
            end=default_end,
        )
    kids = tx.rows("SELECT task FROM ankka_task_tree WHERE parent = ? ORDER BY seq", (record.id,))
    return TreeView(
        parent=found.parent or found.origin,
        children=tuple(str(k[0]) for k in kids),
        tree_usage=found.tree_usage,
        tree_iterations=found.tree_iterations,
        end=found.end or default_end,
        depth=found.depth,
        token_budget=found.token_budget,
        tokens_claimed=found.claims.tokens,
        handoffs=found.handoffs,
    )


_ENDS = frozenset({TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELLED})
