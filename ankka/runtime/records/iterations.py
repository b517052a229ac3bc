"""A task iteration's marks in its journal session: started and completed, recorded in the
same append as the model's response (one commit for the three), so an iteration costs no
commit of its own on the task record before its model call.

They are not part of the conversation. The task record's count of iterations and its usage
are set from them (or, in a session recorded before they existed, from the response's model
call) once each (:func:`ankka.runtime.store.task_statements.complete_iteration`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ankka.runtime.records.messages import Usage

__all__ = ["IterationCompleted", "IterationStarted", "iteration_of"]


@dataclass(frozen=True, slots=True)
class IterationStarted:
    kind: ClassVar[str] = "iteration_started"

    number: int

    def as_dict(self) -> dict[str, Any]:
        return {"number": self.number}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IterationStarted:
        return cls(int(data["number"]))


@dataclass(frozen=True, slots=True)
class IterationCompleted:
    kind: ClassVar[str] = "iteration_completed"

    number: int
    usage: Usage = field(default_factory=Usage)

    def as_dict(self) -> dict[str, Any]:
        return {"number": self.number, "usage": self.usage.as_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IterationCompleted:
        return cls(int(data["number"]), Usage.from_dict(data.get("usage") or {}))


def iteration_of(turn: str) -> int | None:
    """The iteration number of a task response's turn, ``<task>#<n>``; None for any other."""
    _, mark, number = turn.rpartition("#")
    return int(number) if mark and number.isdigit() else None
