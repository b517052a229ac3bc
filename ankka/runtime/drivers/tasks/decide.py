"""What a task's result is worth, pure. (Where a task resumes is the engine's planner's:
:func:`ankka.runtime.engine.steps.next_step`, from what the session ``task:<id>`` recorded.)

``decode_result`` and ``check_rules`` judge a ``complete_task`` input: a result that does not
decode goes back to the model as a tool error; one that decodes is checked by the task type's
rules in declared order. A rule that raises decided nothing (:class:`RuleRaised`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.autonomous import COMPLETE_TASK, FAIL_TASK, TaskType
from ankka.runtime.drivers.tasks.prompt import FailTaskInput

__all__ = [
    "ACCEPTED",
    "ENDED_AS_FAILED",
    "Decoded",
    "Malformed",
    "RuleRaised",
    "check_rules",
    "decode_fail",
    "decode_result",
    "result_json",
]

ACCEPTED = "accepted: the task is complete"
ENDED_AS_FAILED = "the task is failed"


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
