"""The approval routes, mounted by :mod:`ankka.runtime.serve.http`.

- ``POST /v1/approvals/{id}`` ``{"decision": "approve"|"refuse", "digest", "reason"?}``:
  recorded (with who decided) before anything runs; the last decision of a turn resumes it and
  answers with the turn. 409 on a digest that does not match or a second decision.
- ``GET /v1/approvals?session=&agent=&state=pending&limit=&cursor=``: the requests the caller
  may read, oldest first, at most ``limit`` (1 to 500, default 500) a page; ``next`` in the
  answer is the ``?cursor=`` of the page after (null on the last). The caller's access is a
  condition of the store's query, so another caller's rows never crowd its own out of a page.
- ``GET /v1/approvals/notifications?session=&agent=&wait=S``: server-sent events, the shape of
  a task's notifications: ``snapshot`` (``{"approvals": [...], "next"}``, the oldest 500
  pending requests as the listing shows them, ``next`` the listing's ``?cursor=`` of the rest
  or null), then ``approval_requested``, ``approval_decided`` and
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
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Path, Query
from starlette.requests import Request
from starlette.responses import Response

from ankka._kernel.errors import RequestError
from ankka.runtime.declare.policy import LOCAL, SessionPolicy
from ankka.runtime.drivers.approvals import Decided
from ankka.runtime.drivers.elicitations import ELICITATION
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.drivers.tasks.host import TaskHost
from ankka.runtime.drivers.tasks.notify import APPROVAL_EVENTS, APPROVALS, Notice, Notifier
from ankka.runtime.records.approvals import Decision
from ankka.runtime.records.session import opened_by
from ankka.runtime.serve.api import EventStream, errors
from ankka.runtime.serve.identity import caller_of
from ankka.runtime.serve.tasks_http import Wait, event_stream, follow, sse, stream_answers
from ankka.runtime.serve.wire import ApprovalListing, DecisionAnswer, DecisionBody
from ankka.runtime.store.approval_index import cursor_of
from ankka.runtime.store.readable import MAX_LIMIT, decode_cursor, encode_cursor, readers

__all__ = ["add_approval_routes", "decider", "awaiting_json"]

TASK_SESSION = "task:"
READABLE_KEPT = 4096  # sessions whose readability a stream remembers, at most
log = logging.getLogger("ankka.approvals")
_DECISIONS: dict[str, Decision] = {"approve": "approved", "refuse": "refused"}
ApprovalId = Annotated[
    str, Path(description="the approval's id, as the 202 or the listing gave it")
]
OfSession = Annotated[str | None, Query(description="only this session's")]
OfAgent = Annotated[str | None, Query(description="only this agent's")]
InState = Annotated[
    Literal["pending", "approved", "refused", "expired", "ended"] | None,
    Query(description="only those in this state"),
]
Limit = Annotated[
    int, Query(ge=1, le=MAX_LIMIT, description=f"at most this many a page (1 to {MAX_LIMIT})")
]
PageCursor = Annotated[
    str | None,
    Query(max_length=2048, description="the previous answer's next: the page after it"),
]
_ANY = (401, 403, 413, 503)


def decider(request: Request, header: str | None, policy: SessionPolicy | None = None) -> str:
    """Who is deciding: the identity the policy authorised (a client certificate's ``ankka://``
    identity or the caller a token names; with the person it names in ``header`` when it is
    one of the policy's approvers: ``ankka approve``'s delegate), a trusted proxy's header, or
    the caller as the runtime names it (``local``). Never a certificate's other URI SANs: the
    record names whom the decide right was checked for (issue 31, item 5)."""
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


def add_approval_routes(
    app: FastAPI,
    runtime: Runtime,
    turn_json: Callable[[Any], dict[str, Any]],
    *,
    approver_header: str | None = None,
    tasks: TaskHost | None = None,
) -> None:
    desk = runtime.approvals
    notifier = tasks.notifier if tasks is not None else Notifier(runtime.clock)
    desk.notify = _heard(notifier)

    @app.get(
        "/v1/approvals",
        operation_id="list_approvals",
        summary="The approvals of the sessions (and tasks) the caller may read",
        response_model=ApprovalListing,
        responses=errors(422, *_ANY),
    )
    async def listing(
        request: Request,
        session: OfSession = None,
        agent: OfAgent = None,
        state: InState = None,
        limit: Limit = MAX_LIMIT,
        cursor: PageCursor = None,
    ) -> Any:
        after = decode_cursor(cursor) if cursor is not None else None
        if desk.index is None:
            return {"approvals": [], "next": None}
        caller = caller_of(request.scope)
        rows = await desk.index.find(
            session=session,
            agent=agent,
            state=state,
            limit=limit + 1,
            who=readers(runtime.policy, caller),
            after=after,
        )
        page, more = rows[:limit], len(rows) > limit
        shown = await runtime.questions.listed(page, caller)
        return {"approvals": shown, "next": encode_cursor(cursor_of(page[-1])) if more else None}

    @app.get(
        "/v1/approvals/notifications",
        operation_id="approval_notifications",
        summary="Pending approvals (snapshot), then the approval events of the sessions and "
        "tasks the caller may read; never ends by itself, only after wait",
        response_class=EventStream,
        responses=stream_answers(
            "approval_requested, approval_decided, approval_expiring",
            ("snapshot", *sorted(APPROVAL_EVENTS), "dropped"),
        ),
    )
    async def notifications(
        request: Request,
        session: OfSession = None,
        agent: OfAgent = None,
        wait: Wait = None,
    ) -> Response:
        caller = caller_of(request.scope)
        readable: dict[str, bool] = {}

        async def keep(notice: Notice) -> bool:
            of = notice.data.get("session") or f"{TASK_SESSION}{notice.task}"
            if session is not None and of != session:
                return False
            if agent is not None and notice.agent != agent:
                return False
            if of not in readable:
                if len(readable) >= READABLE_KEPT:  # a long-lived stream over many sessions
                    readable.clear()
                entries = await runtime.context.journal.read(of)
                opened = opened_by(e.record for e in entries)
                readable[of] = runtime.allows(caller, "read", opened)
            return readable[of]

        async def snapshot() -> bytes:
            # The oldest MAX_LIMIT pending, and the listing's cursor past them when there are
            # more: an installation with thousands waiting gets a bounded event, not all of them.
            who = readers(runtime.policy, caller)
            rows = (
                await desk.index.find(
                    session=session, agent=agent, state="pending", who=who, limit=MAX_LIMIT + 1
                )
                if desk.index is not None
                else []
            )
            page, more = rows[:MAX_LIMIT], len(rows) > MAX_LIMIT
            shown = await runtime.questions.listed(page, caller)
            after = encode_cursor(cursor_of(page[-1])) if more else None
            return sse("snapshot", {"approvals": shown, "next": after})

        # Subscribed before the snapshot is read, so nothing falls between the two.
        subscription = notifier.add(APPROVALS)
        try:
            first = await snapshot()
        except BaseException:
            notifier.remove(APPROVALS, subscription)
            raise

        events = event_stream(subscription, first, seconds=wait, keep=keep, again=snapshot)
        return follow(notifier, APPROVALS, subscription, events)

    @app.post(
        "/v1/approvals/{approval}",
        operation_id="decide_approval",
        summary="Approve or refuse a pending tool call (the decide right over its session)",
        response_model=DecisionAnswer,
        responses=errors(400, 404, 409, 422, 500, 502, 504, *_ANY),
    )
    async def decide(approval: ApprovalId, body: DecisionBody, request: Request) -> Any:
        if approval.startswith(ELICITATION):  # a server's question: to the waiting call
            answered = await runtime.questions.answer(
                approval,
                _DECISIONS[body.decision],
                body.digest,
                content=body.content,
                reason=body.reason,
                decided_by=decider(request, approver_header, runtime.policy),
                caller=caller_of(request.scope),
            )
            return {
                "approval": approval,
                "decision": answered.decision,
                "decided_by": answered.decided_by,
                "status": "recorded",
            }
        if body.content is not None:
            raise RequestError("content answers a server's question (an eli_ id) only")
        decided: Decided = await desk.decide(
            approval,
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
        return answer
