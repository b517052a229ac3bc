"""Declaring autonomous agents and the task types they accept. Pure: no I/O, no clock.

A task type is a wire name (written into every task of that type, so it is declared here as a
string, apart from the Python names holding it), a description the model reads, the result's
pydantic type and rules: pure checks of a decoded result that return ``None`` to pass or a
reason to refuse. An autonomous agent is declared like a request agent (instructions, tools,
guardrails, model) and accepts task types, each with an iteration budget (the most model
calls it may spend on one task)::

    summary = TaskType("summary", description="...", result=Summary, rules=[has_points])
    service.autonomous(
        AutonomousAgent(
            name="researcher", instructions="...", tools=[lookup], accepts=[Accepts(summary, 5)]
        )
    )

The iteration loop (:mod:`ankka.runtime.drivers.tasks.iteration`) belongs to the platform.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.compaction import Compaction
from ankka.runtime.declare.delegation import Delegate, Handoff, Limits
from ankka.runtime.declare.guardrails import AnyGuardrail, Guardrail
from ankka.runtime.declare.mcp import McpServer, normalise
from ankka.runtime.declare.policy import Access
from ankka.runtime.declare.tools import Tool

__all__ = [
    "COMPLETE_TASK",
    "DEFAULT_MAX_CONSECUTIVE_FAILURES",
    "DEFAULT_MAX_IDENTICAL_CALLS",
    "FAIL_TASK",
    "Accepts",
    "AutonomousAgent",
    "Rule",
    "TaskType",
    "rule",
]

COMPLETE_TASK = "complete_task"
FAIL_TASK = "fail_task"
DEFAULT_MAX_CONSECUTIVE_FAILURES = 5
DEFAULT_MAX_IDENTICAL_CALLS = 3
MAX_BUDGET = 10_000
MAX_TOKENS = 10**12

_WIRE_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,62}$")

# A rule is given the decoded result, an instance of its task type's result class.
RuleCheck = Callable[[Any], "str | None"]


@dataclass(frozen=True, slots=True)
class Rule:
    """A pure check of a decoded result: ``None`` passes, a string refuses with that reason.

    A rule that raises has decided nothing: the platform checks again, and counts the attempt
    as a failed iteration, so a broken rule fails its task instead of looping for ever.
    """

    name: str
    check: RuleCheck


def rule(function: RuleCheck, /, *, name: str | None = None) -> Rule:
    """A :class:`Rule` from a function ``(result) -> reason | None``."""
    if inspect.iscoroutinefunction(function):
        raise ConfigurationError(f"rule {function.__name__!r}: rules are pure; make it sync")
    return Rule(name or str(getattr(function, "__name__", "rule")), function)


@dataclass(frozen=True, slots=True)
class TaskType:
    """A kind of task: its wire name, what the model reads of it, its result and rules.

    ``max_output_tokens`` bounds each model answer of every iteration of such a task, sent on
    every wire as a turn's is (:attr:`ankka.runtime.agents.Turn.max_output_tokens`); ``None``
    leaves it to the model's own setting."""

    name: str
    result: type[BaseModel]
    description: str = ""
    rules: tuple[Rule, ...] = ()
    max_output_tokens: int | None = None

    def __init__(
        self,
        name: str,
        *,
        result: type[BaseModel],
        description: str = "",
        rules: Sequence[Rule | RuleCheck] = (),
        max_output_tokens: int | None = None,
    ) -> None:
        if not _WIRE_NAME.match(name):
            raise ConfigurationError(
                f"task type name {name!r} is not a wire name: lowercase letters, digits, "
                "'_', '.' or '-', starting with a letter, at most 63 characters"
            )
        if not (isinstance(result, type) and issubclass(result, BaseModel)):
            raise ConfigurationError(
                f"task type {name!r}: result must be a pydantic model class, not {result!r}"
            )
        if max_output_tokens is not None and (
            isinstance(max_output_tokens, bool)
            or not isinstance(max_output_tokens, int)
            or max_output_tokens < 1
        ):
            raise ConfigurationError(
                f"task type {name!r}: max_output_tokens must be a whole number of at least 1, "
                f"not {max_output_tokens!r}"
            )
        checks = tuple(r if isinstance(r, Rule) else rule(r) for r in rules)
        object.__setattr__(self, "max_output_tokens", max_output_tokens)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "result", result)
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "rules", checks)


@dataclass(frozen=True, slots=True)
class Accepts:
    """An agent accepts ``task_type`` and may spend at most ``budget`` iterations on a task
    and, when ``tokens`` is set, at most that many tokens (input and output) — a task's and
    its descendants' together (docs/delegation.md)."""

    task_type: TaskType
    budget: int
    tokens: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.budget <= MAX_BUDGET:
            raise ConfigurationError(
                f"task type {self.task_type.name!r}: the budget must be 1 to {MAX_BUDGET} "
                f"iterations, not {self.budget}"
            )
        if self.tokens is not None and not 1 <= self.tokens <= MAX_TOKENS:
            raise ConfigurationError(
                f"task type {self.task_type.name!r}: the token budget must be 1 to "
                f"{MAX_TOKENS}, not {self.tokens}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class AutonomousAgent:
    """An agent that works tasks on its own, one at a time per instance.

    Declared like a request agent, under the same names (instructions, tools, guardrails,
    model, ``mcp_servers``, ``result_guardrails`` and ``description_guardrails`` for the MCP
    servers' tools, ``compaction``) and checked where it is declared; ``accepts`` names the
    task types it works, each with its budget.
    """

    name: str
    accepts: Sequence[Accepts]
    instructions: str = ""
    description: str = ""
    tools: Sequence[Tool] = ()
    input_guardrails: Sequence[AnyGuardrail] = ()
    output_guardrails: Sequence[AnyGuardrail] = ()
    model: str = "default"
    reasoning_effort: str | None = None
    max_consecutive_failures: int = DEFAULT_MAX_CONSECUTIVE_FAILURES
    access: Access | None = None  # who besides a task's creator and the platform may act
    # MCP servers whose tools join every iteration (as mcp__<server>__<tool>; where they are
    # comes from ANKKA_MCP_<SERVER>_URL), and the guardrails of their results (before the
    # model or the journal sees them) and descriptions (before they are offered).
    mcp_servers: Sequence[str | McpServer] = ()
    result_guardrails: Sequence[Guardrail] = ()
    description_guardrails: Sequence[Guardrail] = ()
    compaction: Compaction | None = None
    """How a task's session is compacted once it grows (None: only as the deployment's
    ``ANKKA_COMPACTION_*`` says)."""
    delegates: Sequence[Delegate] = ()
    """The agents and task types it may delegate to: one tool each (docs/delegation.md)."""
    handoffs: Sequence[Handoff] = ()
    """The agents it may hand a task on to: one tool each."""
    limits: Limits = field(default_factory=Limits)
    """How deep and wide its delegations may go."""
    max_identical_calls: int = DEFAULT_MAX_IDENTICAL_CALLS
    """The same tool with the same arguments asked for this many times in one task ends the
    task (``repeated_call``), before that call runs."""

    def __post_init__(self) -> None:
        where = f"autonomous agent {self.name!r}"
        if self.access is not None and not isinstance(self.access, Access):
            raise ConfigurationError(f"{where}: access= takes an Access(read=, write=, decide=)")
        for attribute in (
            "accepts",
            "delegates",
            "handoffs",
            "tools",
            "input_guardrails",
            "output_guardrails",
            "result_guardrails",
            "description_guardrails",
        ):
            object.__setattr__(self, attribute, tuple(getattr(self, attribute)))
        object.__setattr__(self, "mcp_servers", normalise(self.mcp_servers, agent=self.name))
        if self.compaction is not None and not isinstance(self.compaction, Compaction):
            raise ConfigurationError(f"{where}: compaction= takes a Compaction(limit_chars=...)")
        if not self.accepts:
            raise ConfigurationError(
                f"{where} accepts no task type; give it accepts=[Accepts(...)]"
            )
        seen: set[str] = set()
        for item in self.accepts:
            if not isinstance(item, Accepts):
                raise ConfigurationError(f"{where}: accepts takes Accepts(task_type, budget=N)")
            if item.task_type.name in seen:
                raise ConfigurationError(f"{where} accepts task type {item.task_type.name!r} twice")
            seen.add(item.task_type.name)
        self._check_delegation(where)
        names = [t.name for t in self.tools]
        names += [d.tool for d in self.delegates] + [h.tool for h in self.handoffs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigurationError(
                f"{where}: two tools share the name(s) {', '.join(duplicates)}"
            )
        reserved = sorted({COMPLETE_TASK, FAIL_TASK} & set(names))
        if reserved:
            raise ConfigurationError(
                f"{where}: {', '.join(reserved)} is a built-in tool of every autonomous agent"
            )
        if self.max_consecutive_failures < 1:
            raise ConfigurationError(f"{where}: max_consecutive_failures must be at least 1")

    def _check_delegation(self, where: str) -> None:
        for item in self.delegates:
            if not isinstance(item, Delegate):
                raise ConfigurationError(f"{where}: delegates takes Delegate(agent, task_type)")
        for handoff in self.handoffs:
            if not isinstance(handoff, Handoff):
                raise ConfigurationError(f"{where}: handoffs takes Handoff(agent)")
            if handoff.agent == self.name:
                raise ConfigurationError(f"{where} cannot hand a task on to itself")
        if not isinstance(self.limits, Limits):
            raise ConfigurationError(f"{where}: limits= takes a Limits(max_depth=, ...)")
        if not 2 <= self.max_identical_calls <= 1000:
            raise ConfigurationError(
                f"{where}: max_identical_calls must be 2 to 1000, not {self.max_identical_calls}"
            )

    def delegate(self, tool: str) -> Delegate | None:
        """The delegation a tool name stands for, or None."""
        return next((d for d in self.delegates if d.tool == tool), None)

    def handoff(self, tool: str) -> Handoff | None:
        """The handoff a tool name stands for, or None."""
        return next((h for h in self.handoffs if h.tool == tool), None)

    def accepted(self, task_type: str) -> Accepts | None:
        """How this agent accepts ``task_type`` (its budget), or None if it does not."""
        return next((a for a in self.accepts if a.task_type.name == task_type), None)

    @property
    def servers(self) -> tuple[McpServer, ...]:
        """The MCP servers, as declarations (``mcp_servers`` normalised)."""
        return tuple(s for s in self.mcp_servers if isinstance(s, McpServer))

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)
