"""Declaring delegation and handoff on an autonomous agent. Pure: no I/O, no clock.

::

    lead = AutonomousAgent(
        name="lead",
        accepts=[Accepts(report, budget=8)],
        delegates=[Delegate(researcher, summary, deadline=600)],
        handoffs=[Handoff("reviewer")],
        limits=Limits(max_depth=3, max_children=8),
    )

:class:`Delegate` gives the model one tool, ``delegate__<agent>__<type>``, whose call makes a
child task of that type for that agent (docs/delegation.md); :class:`Handoff` gives it
``handoff__<agent>``, which moves the task itself to that agent. The agent is named by its
declaration or by its name (an agent declared later in the service); a name the service does
not serve is refused when the model calls it (delegating to another runtime's agents is not
built yet).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.tools import ToolSpec

if TYPE_CHECKING:
    from ankka.runtime.declare.autonomous import TaskType

__all__ = [
    "DEFAULT_DEADLINE",
    "DEFAULT_MAX_CHILDREN",
    "DEFAULT_MAX_DEPTH",
    "Delegate",
    "DelegateInput",
    "Handoff",
    "HandoffInput",
    "Limits",
]

DEFAULT_DEADLINE = 3600.0
DEFAULT_MAX_DEPTH = 4
DEFAULT_MAX_CHILDREN = 16
MAX_DEADLINE = 7 * 24 * 3600.0
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_INSTRUCTIONS = 100_000  # as a task's (records.tasks.MAX_INSTRUCTIONS)


class DelegateInput(BaseModel):
    """What the model gives a delegation tool: the child task's instructions."""

    instructions: str = Field(
        min_length=1, max_length=MAX_INSTRUCTIONS, description="What the child task is to do."
    )
    attachments: list[str] = Field(
        default_factory=list,
        max_length=32,
        description="Text the child task is given with its instructions (optional).",
    )


class HandoffInput(BaseModel):
    """What the model gives a handoff tool: a note for the agent taking the task over."""

    note: str = Field(
        default="", max_length=10_000, description="Why, and what the next agent should know."
    )


def _agent_name(agent: Any) -> str:
    name = agent if isinstance(agent, str) else getattr(agent, "name", None)
    if not isinstance(name, str) or not name:
        raise ConfigurationError(
            f"an agent to delegate or hand off to is an AutonomousAgent or its name, not {agent!r}"
        )
    return name


def _tool_name(name: str, what: str) -> str:
    if not _TOOL_NAME.match(name):
        raise ConfigurationError(
            f"{what}: tool name {name!r} is not one a model takes (1 to 64 letters, digits, "
            "'_' or '-'); give it tool='...'"
        )
    return name


@dataclass(frozen=True, slots=True, init=False)
class Delegate:
    """The agent may delegate tasks of ``task_type`` to ``agent``; each child has
    ``deadline`` seconds to end. ``budget`` and ``tokens`` cap what each child is given
    (default: what the child's agent accepts the type with, else what remains)."""

    agent: str
    task_type: TaskType
    tool: str
    deadline: float
    budget: int | None
    tokens: int | None

    def __init__(
        self,
        agent: Any,
        task_type: TaskType,
        *,
        tool: str | None = None,
        deadline: float = DEFAULT_DEADLINE,
        budget: int | None = None,
        tokens: int | None = None,
    ) -> None:
        name = _agent_name(agent)
        type_name = getattr(task_type, "name", None)
        if not isinstance(type_name, str) or not hasattr(task_type, "result"):
            raise ConfigurationError(
                f"Delegate({name!r}, ...): the task type is a TaskType, not {task_type!r}"
            )
        accepted = getattr(agent, "accepted", None)
        if callable(accepted) and accepted(type_name) is None:
            raise ConfigurationError(
                f"Delegate({name!r}, {type_name!r}): agent {name!r} does not accept task type "
                f"{type_name!r}"
            )
        if not 0 < deadline <= MAX_DEADLINE:
            raise ConfigurationError(
                f"Delegate({name!r}, {type_name!r}): deadline must be more than 0 and at most "
                f"{MAX_DEADLINE:g} seconds, not {deadline}"
            )
        for what, value in (("budget", budget), ("tokens", tokens)):
            if value is not None and value < 1:
                raise ConfigurationError(
                    f"Delegate({name!r}, {type_name!r}): {what} must be at least 1, not {value}"
                )
        default = f"delegate__{name}__{type_name}".replace(".", "_")
        object.__setattr__(self, "agent", name)
        object.__setattr__(self, "task_type", task_type)
        object.__setattr__(self, "tool", _tool_name(tool or default, f"Delegate({name!r})"))
        object.__setattr__(self, "deadline", float(deadline))
        object.__setattr__(self, "budget", budget)
        object.__setattr__(self, "tokens", tokens)

    def spec(self, description: str = "") -> ToolSpec:
        """What the model is shown: who the child's agent is, what its task type is and
        returns, and how its end comes back."""
        kind = self.task_type
        about = f" ({description})" if description else ""
        text = (
            f"Delegate a {kind.name!r} task to agent {self.agent!r}{about}. "
            f"{kind.description} "
            "The child works on its own; its end comes back as this call's result: "
            '{"status": "completed", "task", "agent", "result"} with the result, or a status '
            "of failed, cancelled, budget_exhausted, deadline_exceeded or refused with a "
            "reason. Calls in one answer run at once; the next step waits for every one."
        )
        schema = DelegateInput.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(self.tool, " ".join(text.split()), schema)


@dataclass(frozen=True, slots=True, init=False)
class Handoff:
    """The agent may hand its task on to ``agent``, which must accept the task's type."""

    agent: str
    tool: str

    def __init__(self, agent: Any, *, tool: str | None = None) -> None:
        name = _agent_name(agent)
        object.__setattr__(self, "agent", name)
        object.__setattr__(
            self, "tool", _tool_name(tool or f"handoff__{name}", f"Handoff({name!r})")
        )

    def spec(self) -> ToolSpec:
        text = (
            f"Hand this task on to agent {self.agent!r}: it takes the task over with everything "
            "done so far and the budget that remains, and this agent stops working on it."
        )
        schema = HandoffInput.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(self.tool, text, schema)


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """How far an agent's delegations may go: a child at most ``max_depth`` levels below its
    root, at most ``max_children`` children per task over its life."""

    max_depth: int = DEFAULT_MAX_DEPTH
    max_children: int = DEFAULT_MAX_CHILDREN

    def __post_init__(self) -> None:
        if not 1 <= self.max_depth <= 32:
            raise ConfigurationError(f"Limits: max_depth must be 1 to 32, not {self.max_depth}")
        if not 1 <= self.max_children <= 1000:
            raise ConfigurationError(
                f"Limits: max_children must be 1 to 1000, not {self.max_children}"
            )
