"""What the model is shown on each iteration of a task. Pure.

The request is built in three parts so that a provider's prompt cache keeps hitting:

1. the instructions (system): the agent's instructions, the task type's name, description and
   result schema, and how a task ends: the same on every iteration of every task of the type;
2. the task message (the first user message): the task's id, instructions, attachments and the
   results of its dependencies, shown whole on every iteration and never part of the history,
   ending, once the task nears its budget, with where it stands (and that the last is the last);
3. what was done on this task so far: the journal session ``task:<id>``, verbatim.

The tools are the agent's own plus ``complete_task`` (its input is the task type's result) and
``fail_task`` (its input is a reason).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from ankka.runtime.declare.autonomous import COMPLETE_TASK, FAIL_TASK, AutonomousAgent, TaskType
from ankka.runtime.declare.tools import ToolSpec
from ankka.runtime.engine.planning import provider_for
from ankka.runtime.providers.base import ModelProvider, ModelRequest
from ankka.runtime.records.messages import Message, UserMessage
from ankka.runtime.records.tasks import TaskRecord

__all__ = [
    "NUDGE",
    "FailTaskInput",
    "IterationPlan",
    "budget_note",
    "instructions",
    "plan_iteration",
    "task_message",
    "task_tools",
]

NUDGE = (
    "The task is still open: end it by calling complete_task with the result, or fail_task "
    "with a reason."
)
# The model is told where it stands once this many iterations (or fewer) remain.
NEAR_END = 2


class FailTaskInput(BaseModel):
    reason: str = Field(min_length=1, description="Why the task cannot be done.")


@functools.cache
def _schema_json(model: type[BaseModel]) -> str:
    """``model``'s JSON Schema (its title left out, pydantic's key order kept), built once a
    type: pydantic builds it anew on every call, and every iteration shows it to the model."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    return json.dumps(schema)


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(_schema_json(model))  # a fresh copy for each caller
    return schema


@functools.cache
def _schema_shown(model: type[BaseModel]) -> str:
    return json.dumps(_schema(model), sort_keys=True, ensure_ascii=False)


def instructions(agent: AutonomousAgent, task_type: TaskType) -> str:
    parts = [agent.instructions.strip()] if agent.instructions.strip() else []
    parts.append(
        f"You are working a task of type {task_type.name!r}."
        + (f" {task_type.description.strip()}" if task_type.description.strip() else "")
    )
    parts.append("Its result must follow this JSON Schema:\n" + _schema_shown(task_type.result))
    parts.append(
        f"End the task only by calling {COMPLETE_TASK} with the result as its input, or "
        f"{FAIL_TASK} with a reason when it cannot be done. Each reply is one iteration of a "
        "limited budget."
    )
    return "\n\n".join(parts)


def task_tools(agent: AutonomousAgent, task_type: TaskType) -> tuple[ToolSpec, ...]:
    return (
        *(t.spec for t in agent.tools),
        ToolSpec(
            COMPLETE_TASK,
            f"End the task with its result (a {task_type.name!r} result).",
            _schema(task_type.result),
        ),
        ToolSpec(FAIL_TASK, "End the task as failed, saying why.", _schema(FailTaskInput)),
    )


def budget_note(iteration: int, budget: int) -> str | None:
    """Where iteration ``iteration`` (1-based) stands in ``budget``, once the end is near."""
    remaining = budget - iteration + 1
    if remaining <= 1:
        return (
            f"This is iteration {iteration} of {budget}, the last: end the task now with "
            f"{COMPLETE_TASK} or {FAIL_TASK}."
        )
    if remaining <= NEAR_END:
        return (
            f"This is iteration {iteration} of {budget}: {remaining} iterations remain, "
            "this one included."
        )
    return None


def task_message(task: TaskRecord, dependency_results: Mapping[str, Any], note: str | None) -> str:
    parts = [f"Task {task.id} (type {task.spec.type}).", "Instructions:\n" + task.spec.instructions]
    for attachment in task.spec.attachments:
        if attachment.text is not None:
            parts.append(f"Attachment {attachment.name!r}:\n{attachment.text}")
        else:
            parts.append(
                f"Attachment {attachment.name!r} is a reference a tool can fetch: {attachment.ref}"
            )
    for dependency in task.spec.depends_on:
        result = json.dumps(dependency_results.get(dependency), ensure_ascii=False)
        parts.append(f"Result of task {dependency} (a dependency of this one):\n{result}")
    if note is not None:
        parts.append(note)
    return "\n\n".join(parts)


@dataclass(frozen=True, slots=True)
class IterationPlan:
    """One iteration, planned: its number, the model request it makes and the provider it
    goes to. The task loop's counterpart of a request's
    :class:`~ankka.runtime.engine.planning.PlannedTurn`: a frozen value built with no I/O, so a
    resumed iteration is planned again from the records alone."""

    task: str
    iteration: int
    request: ModelRequest
    provider: ModelProvider


def plan_iteration(
    agent: AutonomousAgent,
    task_type: TaskType,
    task: TaskRecord,
    *,
    providers: Mapping[str, ModelProvider],
    history: Sequence[Message],
    dependency_results: Mapping[str, Any],
) -> IterationPlan:
    """Plan the task's next iteration; raises ConfigurationError when its model is not
    configured."""
    provider = provider_for(providers, agent.name, agent.model)
    number = task.iterations_used + 1
    first = UserMessage(
        task_message(task, dependency_results, budget_note(number, task.budget)),
        agent.name,
        f"{task.id}#0",
    )
    request = ModelRequest(
        instructions(agent, task_type),
        (first, *history),
        task_tools(agent, task_type),
        None,
        agent.reasoning_effort,
    )
    return IterationPlan(task.id, number, request, provider)
