"""What the model is shown on each iteration of a task. Pure.

The request is built in three parts so that a provider's prompt cache keeps hitting: each
request of a task is the one before it with the last iteration's answer and results appended
(until a compaction, the one sanctioned change to earlier context):

1. the instructions (system): the agent's instructions, the task type's name, description and
   result schema, and how a task ends: the same on every iteration of every task of the type;
2. the task message (the first user message): the task's id, instructions, attachments and the
   results of its dependencies, shown whole on every iteration and never part of the history
   (the same bytes every time), then, once the session was compacted, the summary of what was
   done before (so two user messages never follow each other);
3. what was done on this task so far: the journal session ``task:<id>``, verbatim (after the
   summary, if any).

Where the task stands in its budget rides on the newest message when the end is near
(:func:`budget_note`): the last tool result of the iteration before, as it is recorded, or the
task message itself when the budget is that short. It is never written into an earlier
message. The tools are the agent's own (and its MCP servers') plus ``complete_task`` (its input
is the task type's result) and ``fail_task`` (its input is a reason).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from ankka.runtime.declare.autonomous import COMPLETE_TASK, FAIL_TASK, AutonomousAgent, TaskType
from ankka.runtime.declare.tools import ToolSpec
from ankka.runtime.records.tasks import TaskRecord

__all__ = [
    "FailTaskInput",
    "budget_note",
    "complete_spec",
    "fail_spec",
    "instructions",
    "task_message",
    "with_note",
]
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


def complete_spec(task_type: TaskType) -> ToolSpec:
    return ToolSpec(
        COMPLETE_TASK,
        f"End the task with its result (a {task_type.name!r} result).",
        _schema(task_type.result),
    )


def fail_spec() -> ToolSpec:
    return ToolSpec(FAIL_TASK, "End the task as failed, saying why.", _schema(FailTaskInput))


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


def task_message(
    task: TaskRecord, dependency_results: Mapping[str, Any], summary: str | None = None
) -> str:
    """The task shown whole: the same on every iteration of the task (with, once compacted,
    the summary of what was done before), and where it stands when its whole budget is near."""
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
    note = budget_note(1, task.budget)
    if note is not None:  # a budget this short: where the first iteration stands
        parts.append(note)
    if summary is not None:
        parts.append(f"Summary of the work on this task so far:\n{summary}")
    return "\n\n".join(parts)


def with_note(content: str, iteration: int, budget: int) -> str:
    """``content`` (the newest message before iteration ``iteration``'s model call) with where
    that iteration stands, when the end is near."""
    note = budget_note(iteration, budget) if iteration <= budget else None
    return content if note is None else f"{content}\n\n{note}"
