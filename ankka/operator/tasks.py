"""Pure builders for Task resources: where the runtime is, what it is sent, what status shows.

A Task is handed to its Agent's runtime as ``PUT /v1/agents/{autonomous agent}/tasks/{uid}``
(idempotent by the resource's uid: handing it again changes nothing), its dependencies named by
their uids. The status mirrors a bounded summary of the runtime's record (phase, iterations of
budget, tokens, result or reason, the record's version, conditions), never its history: etcd is
no journal. A result larger than :data:`MAX_RESULT_BYTES` is left at the runtime, and the
status says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ankka.api.resources import AgentSpec, TaskPhase, TaskSpec
from ankka.operator.agents import SERVICE_PORT
from ankka.operator.objects import Obj

__all__ = [
    "MAX_REASON",
    "MAX_RESULT_BYTES",
    "autonomous_agent",
    "phase_of",
    "runtime_address",
    "runtime_body",
    "status_from_record",
]

MAX_RESULT_BYTES = 16 * 1024
MAX_REASON = 1024

_PHASES = {
    "pending": TaskPhase.PENDING,
    "assigned": TaskPhase.PENDING,
    "in-progress": TaskPhase.RUNNING,
    "result-rejected": TaskPhase.RUNNING,
    "awaiting-approval": TaskPhase.AWAITING_APPROVAL,
    "completed": TaskPhase.COMPLETED,
    "failed": TaskPhase.FAILED,
    "cancelled": TaskPhase.CANCELLED,
}
FINAL_PHASES = frozenset({TaskPhase.COMPLETED, TaskPhase.FAILED, TaskPhase.CANCELLED})


def runtime_address(namespace: str, agent_name: str, spec: AgentSpec) -> str:
    """The runtime's base URL: ``spec.runtime.address`` when set (a runtime outside the
    cluster: ``https://`` for one served with the Agent's certificate, ``http://`` for a
    loopback development loop), else the Agent's own Service, over mTLS."""
    if spec.runtime is not None and spec.runtime.address:
        return spec.runtime.address.rstrip("/")
    return f"https://{agent_name}.{namespace}.svc:{SERVICE_PORT}"


def autonomous_agent(spec: TaskSpec) -> str:
    return spec.autonomous_agent or spec.agent


def runtime_body(
    spec: TaskSpec, dependency_uids: list[str], *, name: str | None = None
) -> dict[str, Any]:
    """The runtime's task body; ``name`` is the Task's ``<namespace>/<name>``, which the
    runtime's console shows (it is not part of the task's identity there)."""
    body: dict[str, Any] = {"type": spec.type, "instructions": spec.instructions}
    if name:
        body["name"] = name
    if spec.attachments:
        body["attachments"] = [
            {k: v for k, v in a.model_dump(exclude_none=True).items() if v != ""}
            for a in spec.attachments
        ]
    if dependency_uids:
        body["depends_on"] = dependency_uids
    if spec.instance:
        body["instance"] = spec.instance
    return body


def phase_of(state: str) -> TaskPhase:
    return _PHASES.get(state, TaskPhase.PENDING)


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_REASON:
        return text
    return text[: MAX_REASON - 1] + "…"


MAX_CHILDREN = 64  # TaskStatus.children, as the CRD bounds it


def status_from_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """The status fields a runtime record gives (camelCase, as the resource spells them)."""
    usage = record.get("usage") or {}
    iterations = record.get("iterations") or {}
    result = record.get("result")
    reason = record.get("reason")
    if result is not None and len(json.dumps(result)) > MAX_RESULT_BYTES:
        reason = (
            f"the result is larger than {MAX_RESULT_BYTES} bytes; read it from the runtime: "
            f"GET /v1/tasks/{record.get('id')}"
        )
        result = None
    return {
        "phase": phase_of(str(record.get("state"))).value,
        "state": record.get("state"),
        "iterationsUsed": int(iterations.get("used", 0)),
        "iterationBudget": iterations.get("budget"),
        "tokens": {
            "input": int(usage.get("input_tokens", 0)),
            "output": int(usage.get("output_tokens", 0)),
            "cacheRead": int(usage.get("cache_read_tokens", 0)),
            "cacheWrite": int(usage.get("cache_write_tokens", 0)),
        },
        "result": result,
        "reason": _cut(reason),
        "lastEvent": record.get("version"),
        "runtimeTask": record.get("id"),
        "parent": record.get("parent"),
        "children": [str(c) for c in list(record.get("children") or [])[:MAX_CHILDREN]],
    }


MAX_APPROVALS = 64


def approvals_from_listing(listing: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pending approvals a runtime lists (``GET /v1/approvals``), as the status spells
    them; at most :data:`MAX_APPROVALS`."""
    out = []
    for item in list(listing.get("approvals") or [])[:MAX_APPROVALS]:
        out.append(
            {
                "id": str(item.get("id")),
                "tool": str(item.get("tool")),
                "digest": str(item.get("digest")),
                "expiresAt": item.get("expires_at"),
            }
        )
    return out


def is_final(status: Obj | None) -> bool:
    phase = (status or {}).get("phase")
    return phase in {p.value for p in FINAL_PHASES}
