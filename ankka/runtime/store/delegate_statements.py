"""Delegation's transactions over the task tables and the tree's (one transaction each).

- :func:`delegate`: make (or find again) the child of one delegation call, with its grant
  reserved from the parent's budget, or say why none is made;
- :func:`expire`: end the children past their deadline (each parent told at once);
- :func:`calls`: what a parent's delegation calls stand at, for its planner.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ankka.runtime.records.delegation import (
    Budget,
    ChildOutcome,
    End,
    Exhausted,
    Grant,
    Refusal,
    child_id,
    grant,
    outcome_of_end,
    refusal,
)
from ankka.runtime.records.tasks import Attachment, TaskSpec, TaskState
from ankka.runtime.store import remote_statements as remote
from ankka.runtime.store import task_statements as statements
from ankka.runtime.store import tree_statements as tree
from ankka.runtime.store.tasks import Ended, Transaction

__all__ = ["Made", "Wanted", "calls", "delegate", "expire", "remote_body"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Wanted:
    """One delegation call, as the parent's driver read it: the parent, the call's place
    (the iteration that asked and its index in that answer), the child it asks for and the
    limits of the delegating agent."""

    parent: str
    call: str
    iteration: int
    index: int
    agent: str
    type: str
    instructions: str
    attachments: tuple[str, ...] = ()
    iterations: int  # what the child's type allows
    tokens: int | None = None
    deadline: float | None = None  # seconds from now
    max_depth: int
    max_children: int
    remote: str | None = None  # the delegate's name when another runtime serves the agent

    @property
    def child(self) -> str:
        return child_id(self.parent, self.iteration, self.index)


@dataclass(frozen=True, slots=True)
class Made:
    """The call's child (None when none was made) and its outcome when known already (a
    refusal, or the end of a child made before a restart); ``created`` when this transaction
    made it, ``ended`` what ended in it."""

    task: str | None
    outcome: ChildOutcome | None
    created: bool = False
    ended: tuple[Ended, ...] = ()


def _refused(why: Refusal, wanted: Wanted) -> Made:
    return Made(None, ChildOutcome.refused(why, agent=wanted.agent))


def delegate(tx: Transaction, wanted: Wanted, *, now: datetime) -> Made:
    """The child of ``wanted``: found when it was made before (a replay makes no second), or
    made now with what remains of the parent's budget reserved for it, or refused."""
    child = wanted.child
    known = tree.row(tx, child)
    if known is not None:
        if known.parent == wanted.parent and known.call == wanted.call:
            return Made(child, known.outcome)
        return _refused(_taken(child), wanted)
    if statements.get(tx, child) is not None:
        return _refused(_taken(child), wanted)
    parent = statements.get(tx, wanted.parent)
    if parent is None or parent.final or parent.cancel_requested:
        return _refused(
            Refusal("parent_ending", "the task is ending; it makes no children"), wanted
        )
    above = tree.ensure_root(tx, parent)
    why = refusal(
        lineage=above.lineage,
        target=wanted.agent,
        depth=above.depth,
        max_depth=wanted.max_depth,
        children=above.children,
        max_children=wanted.max_children,
    )
    if why is not None:
        return _refused(why, wanted)
    given = grant(
        Budget(parent.budget, above.token_budget),
        above.claims,
        iterations=wanted.iterations,
        tokens=wanted.tokens,
    )
    if isinstance(given, Exhausted):
        return _refused(Refusal(End.BUDGET_EXHAUSTED.value, given.reason), wanted)
    ended: list[Ended] = []
    if wanted.remote is None:
        spec = TaskSpec(
            wanted.agent,
            wanted.type,
            wanted.instructions,
            tuple(
                Attachment(f"attachment-{n}", text=t) for n, t in enumerate(wanted.attachments, 1)
            ),
            parent=wanted.parent,
        )
        _, _, ended = statements.put(
            tx,
            child,
            spec,
            instance=None,
            budget=given.iterations,
            created_by=parent.created_by,
            may_read=statements.read_any,  # a child names no dependencies
            now=now,
        )
    made = tree.insert_child(
        tx,
        above,
        task=child,
        agent=wanted.agent,
        call=wanted.call,
        given=given,
        deadline_at=now.timestamp() + wanted.deadline if wanted.deadline else None,
        deadline_seconds=wanted.deadline,
        remote=wanted.remote,
    )
    if wanted.remote is not None:
        remote.record(tx, child, wanted.remote, remote_body(wanted, made.lineage[:-1], given))
    return Made(child, None, True, tuple(ended))


def remote_body(wanted: Wanted, lineage: Sequence[str], given: Grant) -> dict[str, Any]:
    """The body of the ``PUT`` that creates ``wanted``'s child at its peer: the task, its
    parent here, the chain of agents above it and its grant as its budget."""
    budget: dict[str, int] = {"iterations": given.iterations}
    if given.tokens is not None:
        budget["tokens"] = given.tokens
    return {
        "type": wanted.type,
        "instructions": wanted.instructions,
        "attachments": list(wanted.attachments),
        "budget": budget,
        "parent": wanted.parent,
        "lineage": list(lineage),
    }


def _taken(child: str) -> Refusal:
    return Refusal(
        "id_taken",
        f"task {child!r} already exists and is not this call's child; its id is taken",
    )


def calls(tx: Transaction, children: Sequence[str]) -> dict[str, ChildOutcome | None]:
    """The outcome of each of ``children`` made so far (None while it works); a child not
    made yet is left out."""
    found: dict[str, ChildOutcome | None] = {}
    for child in children:
        known = tree.row(tx, child)
        if known is not None:
            found[child] = known.outcome
    return found


def expire(tx: Transaction, *, now: datetime, limit: int = 100) -> list[Ended]:
    """End every child past its deadline: a child here is ended ``deadline_exceeded`` (and
    its own children with it), a remote child's parent is told so at once and given its grant
    back (its runtime is sent the cancel). Each parent woken is named in what is answered."""
    ended: list[Ended] = []
    for child in tree.due(tx, now.timestamp(), limit):
        reason = f"no end within its deadline of {child.deadline_seconds or 0:g} s"
        if child.remote is None:
            ended += statements.finish(
                tx,
                child.task,
                TaskState.FAILED,
                reason=reason,
                end=End.DEADLINE_EXCEEDED,
                now=now,
            )
            continue
        outcome = outcome_of_end(
            End.DEADLINE_EXCEEDED, task=child.task, agent=child.agent, reason=reason
        )
        woken = tree.set_outcome(tx, child.task, outcome)
        # The parent goes on now: what the child was given is its parent's again (what it
        # spent is added when its runtime says).
        tree.release_grant(tx, child.task)
        if woken is not None:
            ended.append(Ended(child.task, child.agent, None, TaskState.FAILED, reason, woken))
    return ended
