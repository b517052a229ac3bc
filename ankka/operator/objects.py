"""Small pure helpers every builder shares: labels, owner references, conditions.

Kubernetes objects are plain dicts here (``Obj``): they go to the API server as JSON and the
builders' tests compare them as data.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ankka.api.resources import GROUP, VERSION, ConditionStatus

__all__ = [
    "Obj",
    "condition",
    "condition_status",
    "labels_for",
    "owner_reference",
    "set_condition",
    "timestamp",
]

Obj = dict[str, Any]


def timestamp(now: dt.datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, as Kubernetes writes times."""
    if now.tzinfo is None:
        raise ValueError("timestamps must be aware datetimes (UTC); got a naive one")
    return now.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def labels_for(component: str, instance: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": component,
        "app.kubernetes.io/instance": instance,
        "app.kubernetes.io/part-of": "ankka",
        "app.kubernetes.io/managed-by": "ankka-operator",
    }


def owner_reference(kind: str, name: str, uid: str) -> dict[str, Any]:
    """Makes the child the owner's: the garbage collector deletes it with the owner."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def condition(
    kind: str, status: ConditionStatus, reason: str, message: str, *, now: dt.datetime
) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status.value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": timestamp(now),
    }


def set_condition(conditions: list[dict[str, Any]], new: dict[str, Any]) -> list[dict[str, Any]]:
    """Replace the condition of ``new``'s type; keep its transition time if status is unchanged."""
    out: list[dict[str, Any]] = []
    placed = False
    for old in conditions:
        if old.get("type") == new["type"]:
            merged = dict(new)
            if old.get("status") == new["status"] and old.get("lastTransitionTime"):
                merged["lastTransitionTime"] = old["lastTransitionTime"]
            out.append(merged)
            placed = True
        else:
            out.append(old)
    if not placed:
        out.append(new)
    return out


def condition_status(status: dict[str, Any] | None, kind: str) -> str | None:
    """The ``status`` string of one condition type, or None when absent."""
    for cond in (status or {}).get("conditions") or []:
        if cond.get("type") == kind:
            value = cond.get("status")
            return value if isinstance(value, str) else None
    return None
