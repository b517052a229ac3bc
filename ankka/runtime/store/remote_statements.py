"""Children another runtime works: what is sent to create each, and what is followed.

A delegation to an agent another runtime serves (a *peer*, docs/delegation.md) makes no task
here: its tree row (``ankka_task_tree.remote`` names the peer) holds its grant and outcome,
and this side table holds the body of the ``PUT`` that creates it there, written in the
transaction that makes the row, so that any process, after any restart, can send it again
(the child's id is derived from the call, so sending it again makes nothing new there).

Its table (``ankka_remote_children``) is in the tree's schema
(:data:`~ankka.runtime.store.tree_statements.TREE_SCHEMA`): a table of its own, so a store
written before it needs no migration; its ``created`` and ``reported`` columns came later, and
are added to a store written before them when the store is opened (its rows read as not known
to be made, with nothing reported).

- :func:`record`: the child's body, beside its tree row;
- :func:`made`: the peer answered the ``PUT`` with the child: it exists there from now on, so
  a 4xx about it is a failure, never a refusal, whichever process or restart meets it;
- :func:`reported`: what the peer's latest answer about the child said its tree spent, kept so
  that a child the peer loses is counted with it after a restart too;
- :func:`following`: the children still to be followed (not settled yet), with their bodies;
- :func:`a2a_task` and :func:`remember_a2a`: which A2A task a child sent to a remote A2A
  agent became (the A2A client's ledger, ``ankka_remote_a2a``);
- :func:`shown`: what the console shows of a child (its type, its spend as last reported);
- :func:`ended`: the peer said the child ended: its spend joins the tree and its parent is
  told, once (:func:`ankka.runtime.store.tree_statements.remote_ended`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ankka.runtime.records.delegation import ChildOutcome
from ankka.runtime.records.messages import Usage
from ankka.runtime.records.tasks import TaskState
from ankka.runtime.store import tree_statements as tree
from ankka.runtime.store.tasks import Ended, Transaction

__all__ = [
    "Followed",
    "a2a_task",
    "ended",
    "following",
    "made",
    "record",
    "remember_a2a",
    "reported",
    "shown",
]

_STATES = {"completed": TaskState.COMPLETED, "cancelled": TaskState.CANCELLED}


@dataclass(frozen=True, slots=True)
class Followed:
    """A remote child still to follow: its id, its peer (the agent's name), the body that
    creates it there, what its parent was told already (a deadline, the parent's end: its
    cancel is then owed), whether that cancel was sent, whether the peer answered the
    ``PUT`` with the child (``created``: recorded by :func:`made`), and the spend of its
    tree the peer last reported (``spent``: iterations and usage, recorded by
    :func:`reported`; nothing when it reported none), and its ancestors here (nearest
    last: their notification streams carry its events)."""

    task: str
    peer: str
    body: dict[str, Any]
    outcome: ChildOutcome | None
    cancel_sent: bool
    created: bool = False
    spent: tuple[int, Usage] = (0, Usage())
    ancestors: tuple[str, ...] = ()


def record(tx: Transaction, task: str, peer: str, body: dict[str, Any]) -> None:
    tx.rows(
        "INSERT INTO ankka_remote_children (task, peer, body) VALUES (?, ?, ?)",
        (task, peer, json.dumps(body, ensure_ascii=False)),
    )


def made(tx: Transaction, task: str, *, iterations: int, usage: Usage) -> None:
    """The peer answered ``task``'s ``PUT`` with the child, its tree having spent
    ``iterations`` and ``usage``: it is made there."""
    tx.rows(
        "UPDATE ankka_remote_children SET created = 1, reported = ? WHERE task = ?",
        (_reported(iterations, usage), task),
    )


def reported(tx: Transaction, task: str, *, iterations: int, usage: Usage) -> None:
    """The peer's latest answer about ``task`` said its tree spent ``iterations`` and
    ``usage``."""
    tx.rows(
        "UPDATE ankka_remote_children SET reported = ? WHERE task = ?",
        (_reported(iterations, usage), task),
    )


def _reported(iterations: int, usage: Usage) -> str:
    return json.dumps({"iterations": iterations, "usage": usage.as_dict()})


def _spent(stored: str | None) -> tuple[int, Usage]:
    if stored is None:
        return 0, Usage()
    given = json.loads(stored)
    return int(given["iterations"]), Usage.from_dict(given["usage"])


def shown(tx: Transaction, task: str) -> tuple[str, tuple[int, Usage]] | None:
    """A remote child's task type (from the body that creates it) and the spend of its tree
    the peer last reported, or None when ``task`` is no remote child here."""
    rows = tx.rows("SELECT body, reported FROM ankka_remote_children WHERE task = ?", (task,))
    if not rows:
        return None
    body = json.loads(rows[0][0])
    return str(body.get("type", "")), _spent(rows[0][1])


def following(tx: Transaction, limit: int = 100, *, task: str | None = None) -> list[Followed]:
    """The remote children whose end has not been settled yet (or only ``task``)."""
    where, params = ("AND r.task = ? ", (task, limit)) if task is not None else ("", (limit,))
    rows = tx.rows(
        "SELECT r.task, r.peer, r.body, t.outcome, t.cancel_sent, r.created, r.reported, "
        "t.ancestors "
        "FROM ankka_remote_children r "
        f"JOIN ankka_task_tree t ON t.task = r.task WHERE t.settled = 0 {where}"
        "ORDER BY r.task LIMIT ?",
        params,
    )
    return [
        Followed(
            str(r[0]),
            str(r[1]),
            json.loads(r[2]),
            ChildOutcome.from_dict(json.loads(r[3])) if r[3] is not None else None,
            bool(r[4]),
            bool(r[5]),
            _spent(r[6]),
            tuple(json.loads(r[7])),
        )
        for r in rows
    ]


def ended(
    tx: Transaction, task: str, outcome: ChildOutcome, *, iterations: int, usage: Usage
) -> list[Ended]:
    """The peer said ``task`` ended (``outcome``), having spent ``iterations`` and ``usage``
    over its tree: settled once; what ended, with the parent to wake, or nothing when it was
    settled before."""
    found = tree.row(tx, task)
    if found is None or found.settled:
        return []
    woken = tree.remote_ended(tx, task, outcome, iterations=iterations, usage=usage)
    state = _STATES.get(outcome.status, TaskState.FAILED)
    told: dict[str, Any] = {"end": outcome.status, "event_id": f"{task}/end"}
    if outcome.error:
        told["error"] = outcome.error
    if found.remote is not None:
        told["remote"] = found.remote
    return [Ended(task, found.agent, None, state, outcome.reason, woken, told)]


def a2a_task(tx: Transaction, key: str) -> tuple[str, str] | None:
    """The A2A task (and its context) ``key``'s message became, once its agent answered."""
    found = tx.rows("SELECT task, context FROM ankka_remote_a2a WHERE key = ?", (key,))
    return (str(found[0][0]), str(found[0][1])) if found else None


def remember_a2a(tx: Transaction, key: str, task: str, context: str) -> None:
    if a2a_task(tx, key) is None:
        tx.rows(
            "INSERT INTO ankka_remote_a2a (key, task, context) VALUES (?, ?, ?)",
            (key, task, context),
        )
