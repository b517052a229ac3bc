"""Delegation's values and the pure decisions over them: no I/O, no clock.

A task may create child tasks (docs/delegation.md). What is decided about a child is decided
here, from recorded values only, so a replay decides the same:

- its id (:func:`child_id`): derived from the parent's id and the call's place (the
  iteration that asked, the call's index in that answer), so a replay finds the child it made;
- whether it may be made at all (:func:`refusal`): the chain of agents (no cycles), its depth,
  the parent's count of children, and whether the parent is ending;
- what it is given of the parent's budget (:func:`grant`) and what goes back when it ends
  (:func:`settled`): the parent's *claims* are its own spend plus, per child, the grant while
  the child works and the child's tree spend once it ended;
- whether a task may make its next model call (:func:`exhausted`);
- what its parent is told when it ends (:class:`ChildOutcome`), as that call's tool result.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ankka.runtime.records.messages import Usage

__all__ = [
    "MAX_CHAIN",
    "Budget",
    "ChildOutcome",
    "Claims",
    "End",
    "Exhausted",
    "Grant",
    "Refusal",
    "TreeView",
    "child_id",
    "exhausted",
    "grant",
    "outcome_of_end",
    "refusal",
    "settled",
    "tokens_of",
]

MAX_ID = 128  # as a task id (records.tasks.MAX_ID)
MAX_CHAIN = 64  # the longest chain of agents a body may carry (a remote child's lineage)


class End(enum.StrEnum):
    """How a task ended, for a program to read (its ``reason`` is for a person)."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    BUDGET_EXHAUSTED = "budget_exhausted"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    REPEATED_CALL = "repeated_call"


def child_id(parent: str, iteration: int, index: int) -> str:
    """The id of the child made by the ``index``-th call (from 0) of ``parent``'s iteration
    ``iteration``: ``<parent>:<iteration>.<index>``, or ``d-<digest>`` when that is longer
    than an id may be."""
    derived = f"{parent}:{iteration}.{index}"
    if len(derived) <= MAX_ID:
        return derived
    digest = hashlib.sha256(derived.encode()).hexdigest()[:40]
    return f"d-{digest}"


def tokens_of(usage: Usage) -> int:
    """The tokens a budget counts: input and output, as the provider reported them."""
    return usage.input_tokens + usage.output_tokens


@dataclass(frozen=True, slots=True)
class Budget:
    """What a task may spend over its whole tree: iterations, and tokens when set."""

    iterations: int
    tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Claims:
    """What is taken from a task's budget: its own spend, plus per child the grant while the
    child works and the child's tree spend once it ended."""

    iterations: int = 0
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class Grant:
    """What a child is given: its iterations, and its tokens (None: no token budget).
    ``from_parent``: the tokens were taken from the parent's token budget (so they go back to
    it), rather than being the child's type's own."""

    iterations: int
    tokens: int | None = None
    from_parent: bool = False


@dataclass(frozen=True, slots=True)
class Exhausted:
    """Nothing is left of ``what`` (``iterations`` or ``tokens``) to give or to spend."""

    what: str
    budget: int
    claimed: int

    @property
    def reason(self) -> str:
        unit = "iterations" if self.what == "iterations" else "tokens"
        return (
            f"the task reached its budget of {self.budget} {unit} ({self.claimed} used or "
            "reserved by it and its children)"
        )


def grant(
    budget: Budget, claims: Claims, *, iterations: int, tokens: int | None
) -> Grant | Exhausted:
    """What a new child gets of a parent with ``budget`` and ``claims``, when its task type
    allows it ``iterations`` and ``tokens``: at most what remains of each."""
    left = budget.iterations - claims.iterations
    if left < 1:
        return Exhausted("iterations", budget.iterations, claims.iterations)
    given = min(iterations, left)
    if budget.tokens is None:
        return Grant(given, tokens, from_parent=False)
    tokens_left = budget.tokens - claims.tokens
    if tokens_left <= 0:
        return Exhausted("tokens", budget.tokens, claims.tokens)
    return Grant(given, tokens_left if tokens is None else min(tokens, tokens_left), True)


def settled(given: Grant, spent_iterations: int, spent_tokens: int) -> Claims:
    """How a parent's claims change when a child given ``given`` ends having spent (over its
    tree) ``spent_iterations`` and ``spent_tokens``: its grant goes, its spend stays."""
    tokens = spent_tokens - (given.tokens or 0) if given.from_parent else 0
    return Claims(spent_iterations - given.iterations, tokens)


def exhausted(budget: Budget, claims: Claims) -> Exhausted | None:
    """Whether a task with ``budget`` and ``claims`` may not make another model call."""
    if claims.iterations >= budget.iterations:
        return Exhausted("iterations", budget.iterations, claims.iterations)
    if budget.tokens is not None and claims.tokens >= budget.tokens:
        return Exhausted("tokens", budget.tokens, claims.tokens)
    return None


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a delegation makes no child: ``error`` for a program, ``reason`` for a person,
    ``chain`` the agents from the root to the refused one (a cycle's)."""

    error: str
    reason: str
    chain: tuple[str, ...] = ()


def refusal(
    *,
    lineage: Sequence[str],
    target: str,
    depth: int,
    max_depth: int,
    children: int,
    max_children: int,
    ending: bool = False,
) -> Refusal | None:
    """Whether a task whose chain of agents (root first, itself last) is ``lineage``, at
    ``depth`` below its root and with ``children`` made so far, may make a child for agent
    ``target``."""
    if ending:
        return Refusal("parent_ending", "the task is ending (cancelled, or out of time)")
    if target in lineage:
        chain = (*lineage, target)
        return Refusal(
            "delegation_cycle",
            f"delegating to {target!r} would make a cycle: {' → '.join(chain)}",
            chain,
        )
    if depth + 1 > max_depth:
        return Refusal(
            "depth_exceeded",
            f"a child of this task would be {depth + 1} levels below its root; at most "
            f"{max_depth} are allowed",
            (*lineage, target),
        )
    if children >= max_children:
        return Refusal(
            "too_many_children",
            f"this task has made {children} children; at most {max_children} are allowed",
        )
    return None


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    """What a parent is told of one delegation call, exactly once, as its tool result."""

    status: str  # an End, or "refused" (no child was made)
    task: str | None = None
    agent: str | None = None
    result: Any = None
    reason: str | None = None
    error: str | None = None  # a refusal's kind
    chain: tuple[str, ...] = ()

    @property
    def is_error(self) -> bool:
        return self.status != End.COMPLETED

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": self.status, "task": self.task, "agent": self.agent}
        if self.status == End.COMPLETED:
            data["result"] = self.result
        else:
            data["reason"] = self.reason
        if self.error is not None:
            data["error"] = self.error
        if self.chain:
            data["chain"] = list(self.chain)
        return data

    def content(self) -> str:
        """The tool result's text (what the model reads)."""
        return json.dumps(self.as_dict(), ensure_ascii=False, separators=(", ", ": "))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChildOutcome:
        return cls(
            status=str(data["status"]),
            task=data.get("task"),
            agent=data.get("agent"),
            result=data.get("result"),
            reason=data.get("reason"),
            error=data.get("error"),
            chain=tuple(str(a) for a in data.get("chain", ())),
        )

    @classmethod
    def refused(cls, why: Refusal, *, agent: str) -> ChildOutcome:
        return cls("refused", None, agent, None, why.reason, why.error, why.chain)


def outcome_of_end(
    end: End, *, task: str, agent: str, result: Any = None, reason: str | None = None
) -> ChildOutcome:
    """The outcome of a child that ended ``end``."""
    if end == End.COMPLETED:
        return ChildOutcome(End.COMPLETED.value, task, agent, result)
    return ChildOutcome(end.value, task, agent, None, reason or end.value)


@dataclass(frozen=True, slots=True)
class TreeView:
    """A task's place in its tree, as its record shows it: its parent (a task here, or
    another runtime's), its children in the order they were made, its tree's usage and
    iterations (its own plus every descendant's), and how it ended."""

    parent: str | None = None
    children: tuple[str, ...] = ()
    tree_usage: Usage = field(default_factory=Usage)
    tree_iterations: int = 0
    end: str | None = None
    depth: int = 0
    token_budget: int | None = None
    tokens_claimed: int = 0
    handoffs: tuple[dict[str, Any], ...] = ()  # {"from", "to", "at", "note"}, oldest first
