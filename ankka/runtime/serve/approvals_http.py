"""The approval routes, mounted by :mod:`ankka.runtime.serve.http`.

- ``POST /v1/approvals/{id}`` ``{"decision": "approve"|"refuse", "digest", "reason"?}``:
  recorded (with who decided) before anything runs; the last decision of a turn resumes it and
  answers with the turn. 409 on a digest that does not match or a second decision.
- ``GET /v1/approvals?session=&agent=&state=pending``: the requests, newest state first.

Both follow the session policy (:mod:`ankka.runtime.declare.policy`): the listing shows only the
approvals of sessions (and tasks) the caller may read, and deciding needs the decide right
(by default the session's creator and the platform), else 403 naming the caller.

Who decided: the URI SAN of the client certificate when the runtime serves mTLS
(``ankka serve --tls-dir``), else the caller a bearer token names (``--token-file``,
:mod:`ankka.runtime.serve.identity`), else the header a trusted proxy sets (``--approver-header``),
else ``anonymous``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ankka._kernel.errors import RequestError
from ankka.runtime.declare.policy import LOCAL, SessionPolicy
from ankka.runtime.drivers.approvals import Decided
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.records.approvals import Decision
from ankka.runtime.serve.bodies import parse_body
from ankka.runtime.serve.identity import caller_of

__all__ = ["approval_routes", "decider", "awaiting_json"]

ANONYMOUS = "anonymous"
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
    delegate), a trusted proxy's header, or anonymous."""
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
    return ANONYMOUS


def awaiting_json(approvals: Any) -> dict[str, Any]:
    return {"status": "awaiting_approval", "approvals": [a.shown() for a in approvals]}


async def _body(request: Request) -> DecisionBody:
    shape = '{"decision": "approve"|"refuse", "digest": "...", "reason"?: "..."}'
    return parse_body(await request.body(), DecisionBody, shape, limit=16384)


def approval_routes(
    runtime: Runtime,
    turn_json: Callable[[Any], dict[str, Any]],
    *,
    approver_header: str | None = None,
) -> list[Route]:
    desk = runtime.approvals

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

    return [
        Route("/v1/approvals", listing, methods=["GET"]),
        Route("/v1/approvals/{approval}", decide, methods=["POST"]),
    ]
