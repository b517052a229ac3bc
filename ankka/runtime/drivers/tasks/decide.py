"""The iteration loop's decisions, pure: where to resume, and what a result is worth.

``resume_point`` reads what is recorded in the session ``task:<id>`` and says what comes next:
run the tools a recorded response asked for that have no recorded result (a tool is run at
least once), end the task a recorded ``complete_task``/``fail_task`` already settled, or make
the next model call. A model call whose response is recorded is therefore never made again.

``decode_result`` and ``check_rules`` judge a ``complete_task`` input: a result that does not
decode goes back to the model as a tool error; one that decodes is checked by the task type's
rules in declared order. A rule that raises decided nothing (:class:`RuleRaised`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.autonomous import COMPLETE_TASK, FAIL_TASK, TaskType
from ankka.runtime.drivers.tasks.prompt import FailTaskInput
from ankka.runtime.records.messages import AssistantMessage, Message, ToolCall, ToolResult

__all__ = [
    "ACCEPTED",
    "CallModel",
    "Decoded",
    "Ends",
    "Malformed",
    "RuleRaised",
    "RunTools",
    "check_rules",
    "decode_fail",
    "decode_result",
    "resume_point",
]

ACCEPTED = "accepted: the task is complete"
ENDED_AS_FAILED = "the task is failed"


@dataclass(frozen=True, slots=True)
class CallModel:
    pass


@dataclass(frozen=True, slots=True)
class RunTools:
    response: AssistantMessage
    pending: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class Ends:
    """A recorded ``complete_task`` accepted, or ``fail_task``, that the task has not yet
    been ended by (the process stopped between the record and the task's end)."""

    completed: bool
    arguments: str


def resume_point(history: Sequence[Message]) -> CallModel | RunTools | Ends:
    last_response = None
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if isinstance(message, AssistantMessage):
            last_response = index
            break
    if last_response is None:
        return CallModel()
    response = history[last_response]
    assert isinstance(response, AssistantMessage)
    results = {m.call_id: m for m in history[last_response + 1 :] if isinstance(m, ToolResult)}
    for call in response.tool_calls:
        result = results.get(call.id)
        if result is None:
            break
        if not result.is_error and call.name == COMPLETE_TASK:
            return Ends(True, call.arguments)
        if not result.is_error and call.name == FAIL_TASK:
            return Ends(False, call.arguments)
    pending = tuple(c for c in response.tool_calls if c.id not in results)
    if pending:
        return RunTools(response, pending)
    return CallModel()


@dataclass(frozen=True, slots=True)
class Decoded:
    value: BaseModel


@dataclass(frozen=True, slots=True)
class Malformed:
    """The input does not decode; ``message`` goes back to the model as a tool error."""

    message: str


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
        for e in exc.errors(include_url=False)
    )


def decode_result(task_type: TaskType, arguments: str) -> Decoded | Malformed:
    try:
        return Decoded(task_type.result.model_validate_json(arguments or "{}"))
    except ValidationError as exc:
        return Malformed(
            f"the result does not decode as a {task_type.name!r} result ({_problems(exc)}); "
            f"call {COMPLETE_TASK} again with a result that follows its schema"
        )


def decode_fail(arguments: str) -> str | Malformed:
    try:
        return FailTaskInput.model_validate_json(arguments or "{}").reason
    except ValidationError as exc:
        return Malformed(f'{FAIL_TASK} takes {{"reason": "..."}} ({_problems(exc)})')


class RuleRaised(ConfigurationError):
    """A rule raised instead of deciding: the check is made again, as a failed iteration. The
    rule is the service's code, so its owner must act."""

    kind = "rule_raised"

    def __init__(self, rule: str, cause: BaseException) -> None:
        super().__init__(f"rule {rule!r} raised {type(cause).__name__}: {cause}")
        self.rule = rule


def check_rules(task_type: TaskType, value: BaseModel) -> tuple[str, str] | None:
    """The first refusal as (which rule, reason), or None when every rule passes."""
    for rule in task_type.rules:
        try:
            verdict = rule.check(value)
        except Exception as exc:
            raise RuleRaised(rule.name, exc) from exc
        if verdict is not None:
            return f"rule {rule.name!r}", str(verdict)
    return None


def result_json(value: BaseModel) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(value.model_dump_json())
    return data
