"""Task and instance records, and the pure decisions over them.

A task is a durable record with a caller-given id; an instance works the tasks assigned to it
one at a time, in assignment order, letting a ready task go before one that waits on a
dependency. The stores keep these records; everything that decides something about them
(is a body the same, which task goes next, what a failure cancels) is a pure function here,
tested without a store.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ankka._kernel.errors import RequestError
from ankka.runtime.records.delegation import TreeView
from ankka.runtime.records.messages import Usage

__all__ = [
    "FINAL",
    "Attachment",
    "Conflict",
    "InstanceRecord",
    "InstanceState",
    "CONVERSATION_SESSION_PREFIX",
    "TASK_SESSION_PREFIX",
    "TaskBudget",
    "TaskRecord",
    "TaskSpec",
    "TaskState",
    "cascade",
    "check_id",
    "next_task",
    "MEMBER_INSTANCE_PREFIX",
    "OWN_INSTANCE_PREFIX",
    "TEAM_TASK_PREFIX",
    "check_instance_name",
    "own_instance_id",
]

MAX_ID = 128
TASK_SESSION_PREFIX = "task:"  # a task's journal session; only its task writes there
CONVERSATION_SESSION_PREFIX = "conversation:"  # a moderated conversation's (docs/teams.md)
MAX_INSTRUCTIONS = 100_000
MAX_ATTACHMENTS = 32
MAX_ATTACHMENT = 200_000
MAX_DEPENDENCIES = 64
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")


class Conflict(RequestError):
    """The request clashes with what is recorded (a different body under the same id, an
    instance that was terminated)."""

    kind = "conflict"
    status = 409


class TaskState(enum.StrEnum):
    PENDING = "pending"
    ASSIGNED = "assigned"
    IN_PROGRESS = "in-progress"
    AWAITING_APPROVAL = "awaiting-approval"  # its last response's calls wait for a person
    RESULT_REJECTED = "result-rejected"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINAL = frozenset({TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELLED})
WORKING = frozenset({TaskState.IN_PROGRESS, TaskState.RESULT_REJECTED, TaskState.AWAITING_APPROVAL})


class InstanceState(enum.StrEnum):
    ACTIVE = "active"
    SUSPENDED = "suspended"
    TERMINATED = "terminated"
    ENDED = "ended"  # an instance of its own task's, after that task ended


def check_id(value: str, what: str) -> str:
    if not 1 <= len(value) <= MAX_ID or not _ID.match(value):
        raise RequestError(
            f"{what} {value[:MAX_ID]!r} is not a valid id: 1 to {MAX_ID} letters, digits, "
            "'_', '.', ':' or '-', starting with a letter or digit"
        )
    return value


OWN_INSTANCE_PREFIX = "task."
MEMBER_INSTANCE_PREFIX = "team."  # a team's member instances (docs/teams.md)
TEAM_TASK_PREFIX = "team:"  # the tasks of teams' backlog items


def own_instance_id(task: str) -> str:
    """The instance a task created without one gets; it ends with the task."""
    return f"{OWN_INSTANCE_PREFIX}{task}"


def check_instance_name(instance: str) -> str:
    """An instance a caller names: a valid id, and not a task's own (``task.X`` is task X's
    alone, so no caller can take it before X exists)."""
    check_id(instance, "instance")
    if instance.startswith(MEMBER_INSTANCE_PREFIX):
        raise RequestError(
            f"instance {instance!r} is not a name a caller may give: instances named "
            f"'{MEMBER_INSTANCE_PREFIX}...' are teams' member instances; name another"
        )
    if instance.startswith(OWN_INSTANCE_PREFIX):
        raise RequestError(
            f"instance {instance!r} is not a name a caller may give: instances named "
            f"'{OWN_INSTANCE_PREFIX}...' are the tasks' own; leave 'instance' out for a task "
            "of its own, or name another"
        )
    return instance


@dataclass(frozen=True, slots=True)
class Attachment:
    """Content that travels with a task: inline ``text``, or a ``ref`` a tool can fetch."""

    name: str
    text: str | None = None
    ref: str | None = None

    def as_dict(self) -> dict[str, str]:
        data = {"name": self.name}
        if self.text is not None:
            data["text"] = self.text
        if self.ref is not None:
            data["ref"] = self.ref
        return data


@dataclass(frozen=True, slots=True)
class TaskBudget:
    """A budget its creator gave one task (at most its type's): iterations, tokens, or both."""

    iterations: int | None = None
    tokens: int | None = None

    def as_dict(self) -> dict[str, int]:
        data: dict[str, int] = {}
        if self.iterations is not None:
            data["iterations"] = self.iterations
        if self.tokens is not None:
            data["tokens"] = self.tokens
        return data


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """What the creator of a task said: the part that must match when an id is reused.

    ``budget``: the creator's own, below the type's. ``parent`` and ``lineage``: a delegated
    child's parent task and the chain of agents from its root to the parent (for a child
    another runtime's task delegated, the parent is that runtime's task). A spec without them
    is spelt, and so digested, as before they existed."""

    agent: str
    type: str
    instructions: str
    attachments: tuple[Attachment, ...] = ()
    depends_on: tuple[str, ...] = ()
    budget: TaskBudget | None = None
    parent: str | None = None
    lineage: tuple[str, ...] = ()
    # How its creator names it, for people (the operator: the Task's <namespace>/<name>); not
    # part of what must match when the id is reused, so a task handed before it was sent
    # is the same task.
    name: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "agent": self.agent,
            "type": self.type,
            "instructions": self.instructions,
            "attachments": [a.as_dict() for a in self.attachments],
            "depends_on": list(self.depends_on),
        }
        if self.budget is not None:
            data["budget"] = self.budget.as_dict()
        if self.parent is not None:
            data["parent"] = self.parent
        if self.lineage:
            data["lineage"] = list(self.lineage)
        if self.name is not None:
            data["name"] = self.name
        return data

    def digest(self) -> str:
        matched = {k: v for k, v in self.as_dict().items() if k != "name"}
        canonical = json.dumps(matched, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskSpec:
        return cls(
            agent=str(data["agent"]),
            type=str(data["type"]),
            instructions=str(data["instructions"]),
            attachments=tuple(
                Attachment(str(a["name"]), a.get("text"), a.get("ref"))
                for a in data.get("attachments", ())
            ),
            depends_on=tuple(str(d) for d in data.get("depends_on", ())),
            budget=_budget(data.get("budget")),
            parent=data.get("parent"),
            lineage=tuple(str(a) for a in data.get("lineage", ())),
            name=str(data["name"]) if data.get("name") is not None else None,
        )


def _budget(data: Any) -> TaskBudget | None:
    if not data:
        return None
    iterations, tokens = data.get("iterations"), data.get("tokens")
    return TaskBudget(
        int(iterations) if iterations is not None else None,
        int(tokens) if tokens is not None else None,
    )


@dataclass(frozen=True, slots=True)
class TaskRecord:
    id: str
    spec: TaskSpec
    state: TaskState
    budget: int
    instance: str | None = None
    own_instance: bool = False
    iterations_used: int = 0
    iteration_started: int = 0
    started: bool = False
    cancel_requested: bool = False
    usage: Usage = field(default_factory=Usage)
    result: dict[str, Any] | None = None
    reason: str | None = None
    assigned_seq: int | None = None
    version: int = 1
    created_by: str = "local"
    created_at: datetime | None = None
    updated_at: datetime | None = None
    tree: TreeView | None = None  # read with the record where the tree is shown (GET)

    @property
    def final(self) -> bool:
        return self.state in FINAL

    @property
    def session(self) -> str:
        """The journal session that holds what was done on this task."""
        return f"{TASK_SESSION_PREFIX}{self.id}"


@dataclass(frozen=True, slots=True)
class InstanceRecord:
    agent: str
    id: str
    state: InstanceState
    own: bool = False
    created_at: datetime | None = None
    lease_owner: str | None = None
    lease_until: float | None = None
    created_by: str | None = None  # the caller of its first assignment (None: older store)


def next_task(
    queue: Sequence[TaskRecord], states: Mapping[str, TaskState]
) -> tuple[TaskRecord | None, tuple[TaskRecord, ...]]:
    """The task an instance works next, and the ones passed over because they wait.

    ``queue`` is the instance's unfinished tasks; ``states`` the state of every dependency
    they name. A task already begun is carried on first; otherwise the earliest assigned
    whose dependencies have all completed. A task whose dependency ended otherwise is about
    to be cancelled by the cascade and is never started.
    """
    ordered = sorted(queue, key=lambda t: (t.assigned_seq or 0, t.id))
    for task in ordered:
        if task.state in WORKING:
            return task, ()
    waiting: list[TaskRecord] = []
    for task in ordered:
        if task.final:
            continue
        if all(states.get(d) == TaskState.COMPLETED for d in task.spec.depends_on):
            return task, tuple(waiting)
        waiting.append(task)
    return None, tuple(waiting)


def cascade(
    ended: str, dependants: Mapping[str, Iterable[str]], states: Mapping[str, TaskState]
) -> list[str]:
    """Every unfinished task that (at any depth) depends on ``ended``, nearest first.

    ``dependants`` maps a task to the tasks naming it in ``depends_on``. Each is cancelled
    when a task fails or is cancelled; a task already final stops the walk along its branch
    only for itself (its own dependants were dealt with when it ended).
    """
    found: list[str] = []
    seen = {ended}
    frontier = [ended]
    while frontier:
        following: list[str] = []
        for task in frontier:
            for dependant in sorted(dependants.get(task, ())):
                if dependant in seen:
                    continue
                seen.add(dependant)
                if states.get(dependant) in FINAL:
                    continue
                found.append(dependant)
                following.append(dependant)
        frontier = following
    return found
