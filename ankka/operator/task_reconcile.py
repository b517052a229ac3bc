"""Following one Task: hand it to its Agent's runtime, mirror the runtime's record in status.

``handlers`` runs :func:`follow` in a kopf daemon per Task until the Task is final, and
:func:`cancel` when a Task is deleted. Each round is idempotent: the task is handed over by
``PUT`` with the resource's uid as its id (the same body again changes nothing; its answer is
mirrored at once), then read back with ``GET ?wait=S``, which returns as soon as the task ends
or after S seconds (5), so a Task is followed with one request held open at a time and its
status is at most a few seconds behind. A Task whose Agent is missing, held for its models
or failed, or whose dependencies are not yet handed over, stays ``Pending`` with a condition
naming the wait.
The runtime is reached at its Service, or at ``spec.runtime.address``, over mTLS as
``ankka://platform/operator`` (plain HTTP only for an ``http://`` address), and accepted only
when its certificate names the Task's Agent (:mod:`ankka.operator.runtime_client`).
"""

from __future__ import annotations

import logging
from typing import Any

import httpx2
from pydantic import ValidationError

from ankka.api.resources import GROUP, VERSION, AgentSpec, ConditionStatus, TaskPhase, TaskSpec
from ankka.operator import certs, events, tasks
from ankka.operator.objects import Obj, condition, condition_status, set_condition
from ankka.operator.reconcile import Platform, _involved, record
from ankka.operator.runtime_client import RuntimeClients, unreachable

__all__ = ["agent_runtime", "cancel", "follow"]

API_VERSION = f"{GROUP}/{VERSION}"
HANDED = "Handed"
log = logging.getLogger("ankka.operator")


class _Wait(Exception):
    """The Task cannot be handed over yet; ``reason`` and ``message`` say why."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


async def _write(p: Platform, body: Obj, fields: dict[str, Any], handed: Obj) -> None:
    meta = body["metadata"]
    old = body.get("status") or {}
    conditions = set_condition(list(old.get("conditions") or []), handed)
    status = {**fields, "conditions": conditions, "observedGeneration": meta.get("generation")}
    if all(old.get(k) == v for k, v in status.items() if k != "conditions") and (
        [(c.get("type"), c.get("status"), c.get("reason"), c.get("message")) for c in conditions]
        == [
            (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
            for c in old.get("conditions") or []
        ]
    ):
        return
    await p.kube.patch_status(API_VERSION, "Task", meta["namespace"], meta["name"], status)
    body["status"] = {**old, **status}
    was_handed = any(
        c.get("type") == HANDED and c.get("status") == "True" for c in old.get("conditions") or []
    )
    for happening in (
        events.task_handed(
            was_handed, handed.get("status") == "True", str(handed.get("message") or "")
        ),
        events.task_happening(old.get("phase"), fields.get("phase"), _words(fields, handed)),
    ):
        if happening is not None:
            await record(p, _involved(body, "Task"), happening)


def _words(fields: dict[str, Any], handed: Obj) -> str:
    """What a Task's Event says: the reason of an end, else the Handed condition's message."""
    if fields.get("reason"):
        return str(fields["reason"])
    if fields.get("phase") == TaskPhase.COMPLETED.value:
        return "the runtime completed the task; its result is in status.result"
    return str(handed.get("message") or handed.get("reason") or fields.get("phase"))


async def _runtime_of(p: Platform, namespace: str, name: str) -> str:
    """The runtime address of the Agent ``namespace/name``; _Wait while it cannot serve."""
    agent = await p.kube.get(API_VERSION, "Agent", namespace, name)
    if agent is None:
        raise _Wait("AgentNotFound", f"there is no Agent {name!r} in {namespace}")
    status = agent.get("status") or {}
    phase = status.get("phase")
    if phase == "Held":
        waiting = next(
            (
                c.get("message", "")
                for c in status.get("conditions") or []
                if c.get("type") == "ModelsServed"
            ),
            "",
        )
        raise _Wait("AgentHeld", f"held with its Agent {name!r}: {waiting}".rstrip(": "))
    if phase == "Failed":
        raise _Wait("AgentFailed", f"its Agent {name!r} failed; see the Agent's status")
    # Rendered and released is enough: a runtime whose pods are not available yet (or one at
    # spec.runtime.address) refuses the connection, which is retried as RuntimeUnreachable.
    if condition_status(status, "Rendered") != ConditionStatus.TRUE.value:
        raise _Wait("AgentNotReady", f"its Agent {name!r} is not rendered yet")
    try:
        agent_spec = AgentSpec.model_validate(agent.get("spec") or {})
    except ValidationError as exc:
        raise _Wait("AgentFailed", f"its Agent's spec does not parse: {exc}") from exc
    return tasks.runtime_address(namespace, name, agent_spec)


async def agent_runtime(p: Platform, namespace: str, name: str) -> tuple[str | None, str, str]:
    """``(address, "", "")`` of the Agent ``namespace/name``'s runtime, or ``(None, reason,
    message)`` while it cannot be reached (missing, held, failed, not rendered yet)."""
    try:
        return await _runtime_of(p, namespace, name), "", ""
    except _Wait as waiting:
        return None, waiting.reason, waiting.message


async def _dependencies(p: Platform, namespace: str, spec: TaskSpec) -> list[str]:
    uids: list[str] = []
    for name in spec.depends_on:
        other = await p.kube.get(API_VERSION, "Task", namespace, name)
        if other is None:
            raise _Wait("WaitingForDependency", f"its dependency Task {name!r} does not exist")
        if not (other.get("status") or {}).get("runtimeTask"):
            raise _Wait(
                "WaitingForDependency",
                f"its dependency Task {name!r} is not handed to its runtime yet",
            )
        uids.append(str(other["metadata"]["uid"]))
    return uids


def _error_message(answer: httpx2.Response) -> str:
    try:
        return str(answer.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return answer.text[:300]


async def follow(
    p: Platform, namespace: str, name: str, clients: RuntimeClients, *, wait: float = 5.0
) -> bool:
    """One round for the Task ``namespace/name``; True once it is final (or gone)."""
    body = await p.kube.get(API_VERSION, "Task", namespace, name)
    if body is None or body["metadata"].get("deletionTimestamp"):
        return True
    if tasks.is_final(body.get("status")):
        return True
    now = p.clock.now()
    try:
        spec = TaskSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        refused = condition(HANDED, ConditionStatus.FALSE, "InvalidSpec", str(exc), now=now)
        await _write(p, body, {"phase": TaskPhase.FAILED.value, "reason": str(exc)}, refused)
        return True
    uid = str(body["metadata"]["uid"])
    try:
        address = await _runtime_of(p, namespace, spec.agent)
        dependency_uids = await _dependencies(p, namespace, spec)
    except _Wait as waiting:
        held = condition(HANDED, ConditionStatus.FALSE, waiting.reason, waiting.message, now=now)
        await _write(p, body, {"phase": TaskPhase.PENDING.value}, held)
        return False
    agent = tasks.autonomous_agent(spec)
    accepted = condition(
        HANDED, ConditionStatus.TRUE, "Accepted", f"handed to {address} as task {uid}", now=now
    )
    try:
        client = await clients.get(address, certs.agent_uri(namespace, spec.agent))
        answer = await client.put(
            f"{address}/v1/agents/{agent}/tasks/{uid}",
            json=tasks.runtime_body(
                spec, dependency_uids, name=f"{namespace}/{body['metadata']['name']}"
            ),
        )
        if answer.status_code in (200, 201):
            fields = _named(tasks.status_from_record(answer.json()), spec, dependency_uids)
            fields["approvals"] = await _pending_approvals(client, address, uid, fields)
            await _write(p, body, fields, accepted)
            if tasks.is_final(fields):
                return True
            answer = await client.get(
                f"{address}/v1/tasks/{uid}", params={"wait": wait}, timeout=wait + 10
            )
    except httpx2.HTTPError as exc:
        why, message = unreachable(exc, address=address, namespace=namespace, agent=spec.agent)
        failed = condition(HANDED, ConditionStatus.FALSE, why, message, now=now)
        await _write(p, body, {"phase": TaskPhase.PENDING.value}, failed)
        return False
    if answer.status_code >= 500:
        message = (
            f"the runtime at {address} answered {answer.status_code}: {_error_message(answer)}"
        )
        down = condition(HANDED, ConditionStatus.FALSE, "RuntimeUnavailable", message, now=now)
        await _write(p, body, {"phase": TaskPhase.PENDING.value}, down)
        return False
    if answer.status_code >= 400:
        # The runtime refused the task as it is (unknown type or agent, a clash): the spec
        # cannot change, so this Task can never run.
        message = f"the runtime refused the task ({answer.status_code}): {_error_message(answer)}"
        refused = condition(HANDED, ConditionStatus.FALSE, "Refused", message, now=now)
        await _write(p, body, {"phase": TaskPhase.FAILED.value, "reason": message}, refused)
        return True
    fields = _named(tasks.status_from_record(answer.json()), spec, dependency_uids)
    fields["approvals"] = await _pending_approvals(client, address, uid, fields)
    await _write(p, body, fields, accepted)
    return tasks.is_final(fields)


async def _pending_approvals(
    client: httpx2.AsyncClient, address: str, uid: str, fields: dict[str, Any]
) -> list[dict[str, Any]]:
    """The Task's calls waiting for a decision, read from its runtime while it waits."""
    if fields.get("phase") != TaskPhase.AWAITING_APPROVAL.value:
        return []
    try:
        answer = await client.get(
            f"{address}/v1/approvals", params={"session": f"task:{uid}", "state": "pending"}
        )
    except httpx2.HTTPError as exc:
        log.warning("could not list the approvals of task %s: %s", uid, exc)
        return []
    if answer.status_code != 200:
        return []
    return tasks.approvals_from_listing(answer.json())


def _named(fields: dict[str, Any], spec: TaskSpec, uids: list[str]) -> dict[str, Any]:
    """The runtime names dependencies by their uids; a user reads them by Task name."""
    reason = fields.get("reason")
    if isinstance(reason, str):
        for name, uid in zip(spec.depends_on, uids, strict=True):
            reason = reason.replace(uid, name)
        fields["reason"] = reason
    return fields


async def cancel(p: Platform, body: Obj, clients: RuntimeClients) -> None:
    """Cancel a deleted Task at its runtime (best effort: a runtime that cannot be reached is
    logged, and the Task is deleted anyway)."""
    status = body.get("status") or {}
    uid = status.get("runtimeTask")
    if not uid or tasks.is_final(status):
        return
    meta = body["metadata"]
    try:
        spec = TaskSpec.model_validate(body.get("spec") or {})
        address = await _runtime_of(p, meta["namespace"], spec.agent)
        client = await clients.get(address, certs.agent_uri(meta["namespace"], spec.agent))
        answer = await client.post(f"{address}/v1/tasks/{uid}/cancel")
        if answer.status_code >= 400:
            log.warning("cancelling task %s answered %s", uid, answer.status_code)
    except (_Wait, ValidationError, httpx2.HTTPError) as exc:
        log.warning(
            "could not cancel task %s of Task %s/%s: %s", uid, meta["namespace"], meta["name"], exc
        )
