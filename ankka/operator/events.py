"""Pure builders for the Events the operator posts: what it did to an object, and why.

``kubectl describe agent NAME`` lists them. One Event is posted per transition (held,
released, failed, served, probe failing, certificate issued or renewed), never per reconcile,
so a steady object's Events stay quiet. ``ankka.operator.reconcile`` decides and posts them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from ankka.operator.objects import Obj, timestamp

__all__ = [
    "COMPONENT",
    "Happening",
    "agent_happening",
    "event",
    "model_happening",
    "task_happening",
    "task_handed",
]

COMPONENT = "ankka-operator"
_MESSAGE_LIMIT = 1024  # the API server refuses longer messages

Severity = Literal["Normal", "Warning"]


@dataclass(frozen=True, slots=True)
class Happening:
    """What an Event says: its type, a CamelCase reason and the words."""

    type: Severity
    reason: str
    message: str


def agent_happening(previous: str | None, phase: str, message: str) -> Happening | None:
    """The Event for an Agent whose phase went from ``previous`` to ``phase``, if any."""
    if phase == previous:
        return None
    if phase == "Failed":
        return Happening("Warning", "InvalidSpec", message)
    if phase == "Held":
        return Happening("Normal", "Held", message)
    if phase == "Progressing" and previous == "Held":
        return Happening("Normal", "Released", message)
    if phase == "Progressing" and previous == "Ready":
        return Happening("Warning", "Unavailable", message)
    if phase == "Progressing":
        return Happening("Normal", "Rendered", message)
    if phase == "Ready":
        return Happening("Normal", "Available", message)
    return None


def model_happening(was_served: bool | None, served: bool, message: str) -> Happening | None:
    """The Event for an InstallationModel whose Served condition changed (None: never probed)."""
    if served == was_served:
        return None
    if served:
        return Happening("Normal", "Served", message)
    return Happening("Warning", "ProbeFailed", message)


_TASK_EVENTS: dict[str, tuple[Severity, str]] = {
    "Pending": ("Normal", "Waiting"),
    "AwaitingApproval": ("Normal", "AwaitingApproval"),
    "Completed": ("Normal", "Completed"),
    "Failed": ("Warning", "Failed"),
    "Cancelled": ("Normal", "Cancelled"),
}


def task_happening(previous: str | None, phase: str | None, message: str) -> Happening | None:
    """The Event for a Task whose phase went from ``previous`` to ``phase``, if any."""
    if phase is None or phase == previous or phase not in _TASK_EVENTS:
        return None
    severity, reason = _TASK_EVENTS[phase]
    return Happening(severity, reason, message)


def task_handed(was_handed: bool, handed: bool, message: str) -> Happening | None:
    """The Event for a Task the runtime accepted (its Handed condition became True)."""
    return Happening("Normal", "Handed", message) if handed and not was_handed else None


def event(involved: dict[str, Any], happening: Happening, *, now: dt.datetime) -> Obj:
    """A core/v1 Event about ``involved`` (apiVersion, kind, name, namespace, optional uid)."""
    when = timestamp(now)
    message = happening.message
    if len(message) > _MESSAGE_LIMIT:
        message = message[: _MESSAGE_LIMIT - 1] + "…"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{involved['name']}.", "namespace": involved["namespace"]},
        "involvedObject": {
            k: involved[k]
            for k in ("apiVersion", "kind", "name", "namespace", "uid")
            if involved.get(k)
        },
        "type": happening.type,
        "reason": happening.reason,
        "message": message,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT,
        "firstTimestamp": when,
        "lastTimestamp": when,
        "count": 1,
    }
