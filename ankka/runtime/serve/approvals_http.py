"""The approval routes, mounted by :mod:`ankka.runtime.serve.http`.

- ``POST /v1/approvals/{id}`` ``{"decision": "approve"|"refuse", "digest", "reason"?}``:
  recorded (with who decided) before anything runs; the last decision of a turn resumes it and
  answers with the turn. 409 on a digest that does not match or a second decision.
- ``GET /v1/approvals?session=&agent=&state=pending``: the requests, newest state first.
- ``GET /v1/approvals/notifications?session=&agent=&wait=S``: server-sent events, the shape of
  a task's notifications: ``snapshot`` (``{"approvals": [...]}``, the pending requests as the
  listing shows them), then ``approval_requested``, ``approval_decided`` and
  ``approval_expiring`` of request agents' sessions and of tasks as they happen, each only
  when the caller may read its session; ``?wait=S`` ends it after S seconds. Every such event
  is also logged (``ankka.approvals``, which ``ankka serve`` prints), so a person hears of a
  request without subscribing.

Both follow the session policy (:mod:`ankka.runtime.declare.policy`): the listing shows only the
approvals of sessions (and tasks) the caller may read, and deciding needs the decide right
(by default the session's creator and the platform), else 403 naming the caller.

Who decided: the URI SAN of the client certificate when the runtime serves mTLS
(``ankka serve --tls-dir``), else the caller a bearer token names (``--token-file``,
:mod:`ankka.runtime.serve.identity`), else the header a trusted proxy sets (``--approver-header``),
else the caller as the runtime names it (``local`` on loopback, as the console records it).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ankka._kernel.errors import RequestError
from ankka.runtime.declare.policy import LOCAL, SessionPolicy
from ankka.runtime.drivers.approvals import Decided
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.drivers.tasks.host import TaskHost
from ankka.runtime.drivers.tasks.notify import APPROVALS, Notice, Notifier
from ankka.runtime.records.approvals import Decision
from ankka.runtime.records.session import opened_by
from ankka.runtime.serve.bodies import parse_body
from ankka.runtime.serve.identity import caller_of
from ankka.runtime.serve.tasks_http import event_stream, sse, wait_seconds

__all__ = ["approval_routes", "decider", "awaiting_json"]

TASK_SESSION = "task:"
log = logging.getLogger("ankka.approvals")
STATES = ("pending", "approved", "refused", "expired", "ended")
_DECISIONS: dict[str, Decision] = {"approve": "approved", "refuse": "refused"}


class DecisionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    decision: str = Field(pattern="^(approve|refuse)$")
    digest: str = Field(min_length=64, max_length=64)
    reason: str = Field(default="", max_length=2000)


def decider(request: Request, header: str | None, policy: SessionPolicy | None = None) -> str:
    """Who is deciding: the mTLS client's URI SAN, the caller a token names (with the person
    it names in ``header`` when it is one of the policy's approvers: ``ankka approve``'s
    delegate), a trusted proxy's header, or the caller as the runtime names it (``local``)."""
    tls = (request.scope.get("extensions") or {}).get("tls") or {}
    sans = tls.get("peer_uri_sans") or ()
    if sans:
        return str(sans[0])
    caller = caller_of(request.scope)
    if caller != LOCAL:
        named = request.headers.get(header, "").strip()[:200] if header else ""
        if named and policy is not None and policy.is_approver(caller):
            return f"{named} (through {caller})"
        return caller
    if header is not None:
        value = request.headers.get(header, "").strip()
        if value:
            return value[:200]
    return caller


def awaiting_json(approvals: Any) -> dict[str, Any]:
    return {"status": "awaiting_approval", "approvals": [a.shown() for a in approvals]}


async def _body(request: Request) -> DecisionBody:
    shape = '{"decision": "approve"|"refuse", "digest": "...", "reason"?: "..."}'
    return parse_body(await request.body(), DecisionBody, shape, limit=16384)


def _heard(notifier: Notifier) -> Callable[[str, dict[str, Any]], None]:
    """The desk's notices: logged, and published to ``/v1/approvals/notifications``. A task's
    requests and decisions are published by its task host (to the task's subscribers too), so
    of a task's only the desk's ``approval_expiring`` is published here."""

    def notify(event: str, data: dict[str, Any]) -> None:
        shown = {k: data[k] for k in ("session", "agent", "id", "tool", "decision") if k in data}
        log.info("%s %s", event, " ".join(f"{k}={v}" for k, v in shown.items()))
        session = str(data.get("session", ""))
        task = session.removeprefix(TASK_SESSION) if session.startswith(TASK_SESSION) else None
        if task is not None and event != "approval_expiring":
            return
        rest = {k: v for k, v in data.items() if k != "agent"}
        notifier.publish(event, agent=str(data.get("agent", "")), instance=None, task=task, **rest)

    return notify


def approval_routes(
    runtime: Runtime,
    turn_json: Callable[[Any], dict[str, Any]],
    *,
    approver_header: str | None = None,
    tasks: TaskHost | None = None,
) -> list[Route]:
    desk = runtime.approvals
    notifier = tasks.notifier if tasks is not None else Notifier(runtime.clock)
    desk.notify = _heard(notifier)

    async def decide(request: Request) -> Response:
        body = await _body(request)
        decided: Decided = await desk.decide(
            request.path_params["approval"],
            _DECISIONS[body.decision],
            body.digest,
            reason=body.reason,
            decided_by=decider(request, approver_header, runtime.policy),
            caller=caller_of(request.scope),
        )
        answer: dict[str, Any] = {
            "approval": decided.decision.approval,
            "decision": decided.decision.decision,
            "decided_by": decided.decision.decided_by,
            "status": decided.status,
        }
        if decided.status == "recorded":
            answer["pending"] = [r.shown() for r in decided.pending]
        elif decided.status == "awaiting_approval":
            answer.update(awaiting_json(decided.pending))
        elif decided.outcome is not None:
            answer["turn"] = turn_json(decided.outcome)
        return JSONResponse(answer)

    async def listing(request: Request) -> Response:
        query = request.query_params
        state = query.get("state")
        if state is not None and state not in STATES:
            raise RequestError(f"?state= is one of {', '.join(STATES)}, not {state[:40]!r}")
        if desk.index is None:
            return JSONResponse({"approvals": []})
        rows = await desk.index.find(
            session=query.get("session"), agent=query.get("agent"), state=state
        )
        return JSONResponse({"approvals": await desk.shown(rows, caller_of(request.scope))})

    async def notifications(request: Request) -> Response:
        query = request.query_params
        seconds = wait_seconds(request) if "wait" in query else None
        caller = caller_of(request.scope)
        wanted_session, wanted_agent = query.get("session"), query.get("agent")
        readable: dict[str, bool] = {}

        async def keep(notice: Notice) -> bool:
            session = notice.data.get("session") or f"{TASK_SESSION}{notice.task}"
            if wanted_session is not None and session != wanted_session:
                return False
            if wanted_agent is not None and notice.agent != wanted_agent:
                return False
            if session not in readable:
                entries = await runtime.context.journal.read(session)
                opened = opened_by(e.record for e in entries)
                readable[session] = runtime.allows(caller, "read", opened)
            return readable[session]

        # Subscribed before the snapshot is read, so nothing falls between the two.
        subscription = notifier.add(APPROVALS)
        try:
            rows = (
                await desk.index.find(session=wanted_session, agent=wanted_agent, state="pending")
                if desk.index is not None
                else []
            )
            first = sse("snapshot", {"approvals": await desk.shown(rows, caller)})
        except BaseException:
            notifier.remove(APPROVALS, subscription)
            raise

        async def body() -> AsyncIterator[bytes]:
            try:
                events = event_stream(subscription, first, seconds=seconds, keep=keep)
                async for chunk in events:
                    yield chunk
            finally:
                notifier.remove(APPROVALS, subscription)

        return StreamingResponse(
            body(), media_type="text/event-stream", headers={"cache-control": "no-cache"}
        )

    return [
        Route("/v1/approvals", listing, methods=["GET"]),
        Route("/v1/approvals/notifications", notifications, methods=["GET"]),
        Route("/v1/approvals/{approval}", decide, methods=["POST"]),
    ]
