"""The runtime's HTTP API. Thin: parse, call the :class:`~ankka.runtime.drivers.request.Runtime`,
render.

- ``POST /v1/agents/{agent}/sessions/{session}`` ``{"message": "..."}`` →
  ``{"reply", "usage", "cost", "turn", "model_calls"}``; stream-shaped agents answer as
  server-sent events (``delta``, ``tool_call``, ``tool_result``, then ``done`` or ``error``).
- ``POST /v1/agents/{agent}/judgments`` ``{"text": "..."}`` (a judgment handler) →
  ``{"answers": {QUESTION: {"probabilities", "coverage", "measured"}}, "usage"}``.
- ``GET /v1/sessions/{session}/messages``: the whole conversation (compaction removes
  nothing); ``?as_sent=true``: what the model is now shown (the summary, then the rest).
- ``GET /v1/sessions/{session}``: counts, token totals (turns' and compaction's apart, and
  the calls of turns that wrote nothing), compactions, requests pending, the approvals its
  suspended turn waits for.
- ``GET /v1/sessions/{session}/calls``: every model call of the session, written or not.
- ``POST /v1/approvals/{id}``, ``GET /v1/approvals``: :mod:`ankka.runtime.serve.approvals_http`.
  A turn that waits for approval is answered 202 ``{"status": "awaiting_approval",
  "approvals": [...]}`` (a stream ends with an ``awaiting_approval`` event).
- ``GET /v1/agents``, ``GET /healthz``, ``GET /metrics``, and ``GET /openapi.json`` (FastAPI's
  document of these routes: :mod:`ankka.runtime.serve.api`).
- ``GET /readyz``: 200, or 503 naming what is missing (an MCP server without a session);
  ``detail`` names the tools an MCP server's listing left out, and a listing served stale.
- ``GET /v1/mcp/oauth/callback``: an authorization server's answer to a person's consent
  for an MCP server (:mod:`ankka.runtime.serve.mcp_routes`).
- The task routes (autonomous agents), from :mod:`ankka.runtime.serve.tasks_http`.
- ``/a2a/{agent}`` (and ``/.well-known/agent-card.json``): the agents over A2A v1.0, when
  given an :class:`~ankka.runtime.serve.a2a.A2AService` (:mod:`ankka.runtime.serve.a2a`).
- ``GET /console``, ``/console/sessions/{session}``, ``/console/tasks`` and
  ``/console/tasks/{task}``: the console's pages, when enabled
  (:mod:`ankka.runtime.serve.console`).

The routes are FastAPI's; their bodies and answers are the models of
:mod:`ankka.runtime.serve.wire`, which ``/openapi.json`` documents. Every error is
``{"error": {"type", "message"}}`` with the status of its class, a 404 or 405 from routing and
FastAPI's validation included (:mod:`ankka.runtime.serve.api`). Input is bounded in front of the
routes (:mod:`ankka.runtime.serve.bounds`): body size, session-id form, and a caller who leaves
mid-body is counted, not logged as a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any

from fastapi import Path, Query
from fastapi.responses import PlainTextResponse
from pydantic import BeforeValidator
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute

from ankka._kernel.exposition import CONTENT_TYPE
from ankka.runtime.drivers.request import Runtime, TurnResult
from ankka.runtime.drivers.tasks.host import TaskHost
from ankka.runtime.drivers.teams.backlog import TeamHost
from ankka.runtime.drivers.teams.conversation import Conversations
from ankka.runtime.engine.executor import LoopEvent
from ankka.runtime.engine.loop import TurnOutcome
from ankka.runtime.engine.planning import PlannedTurn
from ankka.runtime.providers.base import TextDelta
from ankka.runtime.records.messages import ToolCall
from ankka.runtime.serve.a2a.service import A2AService
from ankka.runtime.serve.api import RuntimeAPI, error_json, errors, events, sent
from ankka.runtime.serve.approvals_http import add_approval_routes, awaiting_json
from ankka.runtime.serve.bounds import DEFAULT_MAX_BODY, MAX_SESSION_ID, BoundedInput
from ankka.runtime.serve.hosts import ServedHosts
from ankka.runtime.serve.identity import Identify, caller_of
from ankka.runtime.serve.mcp_routes import mcp_routes
from ankka.runtime.serve.tasks_http import TASK_AGENT_PATHS, add_task_routes
from ankka.runtime.serve.teams_http import add_conversation_routes, add_team_routes
from ankka.runtime.serve.teams_stream import add_team_watch_routes
from ankka.runtime.serve.wire import (
    Agents,
    Awaiting,
    Calls,
    Conversation,
    Health,
    JudgmentAnswer,
    JudgmentBody,
    NotReady,
    Ready,
    SessionSummary,
    TurnAnswer,
    TurnBody,
)

__all__ = ["create_app"]

log = logging.getLogger("ankka.runtime")

COST_UNKNOWN = "unknown"  # tokens are counted; money is not (there is no price table)
TURN_PATH = "/v1/agents/{agent}/sessions/{session}"
JUDGMENT_PATH = "/v1/agents/{agent}/judgments"

Agent = Annotated[str, Path(description="an agent this service declares")]
Session = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_SESSION_ID,
        description=f"1 to {MAX_SESSION_ID} characters of UTF-8, no '/' or control characters",
    ),
]


def _flag(value: object) -> object:
    if isinstance(value, str):
        lowered = value.lower()
        if lowered not in ("true", "false", "1", "0"):
            raise ValueError(f"takes true or false, not {value[:40]!r}")
        return lowered in ("true", "1")
    return value


AsSent = Annotated[
    bool,
    BeforeValidator(_flag),
    Query(description="what the model is now shown (the compaction summary, then the rest)"),
]
# Who is identified (401, 403), the store or the token review out (503), a body too large
# (413: the bounds refuse one on any route): what any route of the API can answer.
_ANY = (401, 403, 413, 503)
_STREAM = events(
    "the reply; for an agent whose answer is a stream, server-sent events: tool_call, "
    "tool_result and delta, then done (the reply), error or awaiting_approval",
    *("tool_call", "tool_result", "delta", "done", "error", "awaiting_approval"),
)


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _turn_json(result: TurnResult) -> dict[str, Any]:
    return _outcome_json(result.finished)


def _outcome_json(outcome: TurnOutcome) -> dict[str, Any]:
    value = outcome.value
    return {
        "reply": value.model_dump(mode="json") if value is not None else outcome.text,
        "usage": outcome.usage.as_dict(),
        "cost": COST_UNKNOWN,
        "turn": outcome.turn,
        "model_calls": [c.as_dict() for c in outcome.calls],
    }


def _sse(event: str, data: object) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _event_bytes(event: LoopEvent) -> bytes:
    if isinstance(event, TextDelta):
        return _sse("delta", {"text": event.text})
    if isinstance(event, ToolCall):
        return _sse("tool_call", event.as_dict())
    return _sse("tool_result", event.as_dict())


def create_app(
    runtime: Runtime,
    tasks: TaskHost | None = None,
    *,
    max_body: int = DEFAULT_MAX_BODY,
    identify: Identify | None = None,
    approver_header: str | None = None,
    console: bool = False,
    a2a: A2AService | None = None,
    allowed_hosts: frozenset[str] = frozenset(),
    teams: TeamHost | None = None,
    caller_share: int | None = None,
) -> BoundedInput:
    """The API of ``runtime``; with ``tasks``, also the task routes
    (:mod:`ankka.runtime.serve.tasks_http`); with ``teams``, the backlog routes, and the
    conversation routes when the service declares any (:mod:`ankka.runtime.serve.teams_http`).
    Without ``identify`` every caller is ``local``.
    ``approver_header`` names the header a trusted proxy sets to say who decides an approval
    (``ankka.runtime.serve.approvals_http``). With ``console``, the console's pages at ``/console``
    (:mod:`ankka.runtime.serve.console`). With ``a2a`` (entered by its owner), every agent
    also at ``/a2a/{agent}`` (:mod:`ankka.runtime.serve.a2a`). A request is answered only for
    a ``Host`` the runtime serves, ``allowed_hosts`` among them, and never framed
    (:mod:`ankka.runtime.serve.hosts`). With ``caller_share``, an identified caller has at most
    that many requests in flight (:class:`~ankka.runtime.serve.bounds.BoundedInput`)."""
    service = runtime.service
    pages: list[BaseRoute] = []
    if console:
        from ankka.runtime.serve.console.routes import console_routes

        pages = console_routes(runtime, tasks, teams=teams)
    pages = [*pages, *mcp_routes(runtime.context.mcp, console=console)]
    if a2a is not None:  # its own document: the agent cards (docs/a2a.md)
        pages.extend(a2a.routes())
    autonomous = list(service.autonomous_agents) if tasks is not None else []
    app = RuntimeAPI(
        routes=pages,
        agents={
            TURN_PATH: service.agents,
            JUDGMENT_PATH: service.judgments,
            **dict.fromkeys(TASK_AGENT_PATHS, autonomous),
        },
    )
    if tasks is not None:
        add_task_routes(app, tasks, runtime.policy)
    if teams is not None and service.teams:
        add_team_routes(app, teams)
        add_team_watch_routes(app, teams)
    if service.conversations:
        add_conversation_routes(app, Conversations(runtime.context))
    add_approval_routes(app, runtime, _outcome_json, approver_header=approver_header, tasks=tasks)
    _add_session_routes(app, runtime)
    _add_service_routes(app, runtime)
    return BoundedInput(
        ServedHosts(app, allowed=allowed_hosts),
        max_body=max_body,
        on_caller_left=runtime.metrics.caller_left,
        identify=identify,
        caller_share=caller_share,
    )


def _add_session_routes(app: RuntimeAPI, runtime: Runtime) -> None:
    @app.post(
        TURN_PATH,
        operation_id="run_turn",
        summary="Run one turn of an agent in a session",
        response_model=TurnAnswer,
        responses={
            200: _STREAM,
            202: {"model": Awaiting, "description": "the turn waits for a person's decision"},
            **errors(400, 404, 409, 422, 500, 502, 504, *_ANY),
        },
    )
    async def turn(agent: Agent, session: Session, body: TurnBody, request: Request) -> Any:
        planned = runtime.plan(agent, session, body.message)
        caller = caller_of(request.scope)
        if planned.streams:
            return await _stream(runtime, planned, request, caller)
        result = await runtime.run(planned, caller=caller)
        if result.outcome is None:
            return sent(Awaiting, awaiting_json(result.awaiting), 202)
        return _turn_json(result)

    @app.get(
        "/v1/sessions/{session}/messages",
        operation_id="get_messages",
        summary="A session's conversation (or, as_sent, what the model is now shown)",
        response_model=Conversation,
        responses=errors(400, 422, *_ANY),
    )
    async def messages(session: Session, request: Request, as_sent: AsSent = False) -> Any:
        conversation = await runtime.messages(
            session, as_sent=as_sent, caller=caller_of(request.scope)
        )
        return {
            "session": session,
            "as_sent": as_sent,
            "messages": [m.as_dict() for m in conversation],
        }

    @app.get(
        "/v1/sessions/{session}",
        operation_id="get_session",
        summary="A session's summary: counts, token totals, what it waits for",
        response_model=SessionSummary,
        responses=errors(400, *_ANY),
    )
    async def session_summary(session: Session, request: Request) -> Any:
        summary = await runtime.summary(session, caller=caller_of(request.scope))
        return {
            "session": summary.session,
            "messages": summary.messages,
            "turns": summary.turns,
            "pending": summary.pending,
            "usage": summary.usage.as_dict(),
            "unwritten_turns": summary.tally.unwritten_turns,
            "unwritten_usage": summary.tally.unwritten.as_dict(),
            "total_usage": summary.tally.total.as_dict(),
            "judgment_usage": summary.judgment_usage.as_dict(),
            "cost": COST_UNKNOWN,
            "compactions": summary.compactions,
            "compaction_rejections": summary.compaction_rejections,
            "compaction_usage": summary.compaction_usage.as_dict(),
            "awaiting_approval": [a.shown() for a in summary.awaiting],
            "agents": list(summary.agents),
            "created_at": _iso(summary.created_at),
            "updated_at": _iso(summary.updated_at),
        }

    @app.get(
        "/v1/sessions/{session}/calls",
        operation_id="get_calls",
        summary="Every model call of a session, written or not",
        response_model=Calls,
        responses=errors(400, *_ANY),
    )
    async def calls(session: Session, request: Request) -> Any:
        found = await runtime.calls(session, caller=caller_of(request.scope))
        return {
            "session": session,
            "calls": [
                {
                    **call.as_dict(),
                    "turn": turn,
                    "written": why is None,
                    "reason": why,
                    "sampling": server,
                }
                for call, turn, why, server in found
            ],
        }


def _add_service_routes(app: RuntimeAPI, runtime: Runtime) -> None:
    service = runtime.service

    @app.post(
        JUDGMENT_PATH,
        operation_id="ask_judgment",
        summary="Ask a judgment handler about a text",
        response_model=JudgmentAnswer,
        responses=errors(400, 404, 422, 500, 502, 504, *_ANY),
    )
    async def judgments(agent: Agent, body: JudgmentBody) -> Any:
        return (await runtime.judge(agent, body.text)).as_dict()

    @app.get(
        "/v1/agents",
        operation_id="list_agents",
        summary="The declared agents and judgment handlers",
        response_model=Agents,
        responses=errors(*_ANY),
    )
    async def agents() -> Any:
        return {
            "agents": [
                *(
                    {"name": n, "description": d.description, "kind": "request"}
                    for n, d in service.agents.items()
                ),
                *(
                    {
                        "name": n,
                        "description": a.description,
                        "kind": "autonomous",
                        "accepts": [
                            {"type": x.task_type.name, "budget": x.budget} for x in a.accepts
                        ],
                    }
                    for n, a in service.autonomous_agents.items()
                ),
            ],
            "judgments": [
                {"name": n, "description": d.description} for n, d in service.judgments.items()
            ],
        }

    @app.get(
        "/healthz",
        operation_id="healthz",
        summary="Alive (the store is open once the server listens)",
        response_model=Health,
        responses=errors(413),
    )
    async def healthz() -> Any:
        return {"ok": True}

    @app.get(
        "/readyz",
        operation_id="readyz",
        summary="Ready: every declared MCP server has a session",
        response_model=Ready,
        responses={
            503: {"model": NotReady, "description": "not ready: what is missing, and why"},
            **errors(413),
        },
    )
    async def readyz() -> Any:
        # Not ready while a declared MCP server has no session: its tools would be missing.
        # Ready, with ``detail``, while a server's listing left tools out or its last good
        # listing is served because refreshing it fails.
        missing = runtime.missing()
        mcp = runtime.context.mcp
        detail = mcp.detail() if mcp is not None else {}
        shown: dict[str, Any] = {"detail": detail} if detail else {}
        if missing:
            return sent(NotReady, {"ok": False, "missing": missing, **shown}, 503)
        return {"ok": True, **shown}

    @app.get(
        "/metrics",
        operation_id="metrics",
        summary="Prometheus metrics",
        response_class=PlainTextResponse,
        responses=errors(413),
    )
    async def metrics() -> Response:
        return Response(runtime.metrics.render(), media_type=CONTENT_TYPE)


_DONE = object()  # the turn ended (its result or its failure is the task's)
_LEFT = object()  # the caller disconnected


async def _stream(
    runtime: Runtime, planned: PlannedTurn, request: Request, caller: str
) -> Response:
    """Answer a stream-shaped agent as SSE. A failure before the first event is answered as an
    ordinary JSON error (a guardrail refusal is a 403, not a 200 with an error inside). A
    caller who leaves before the first event takes the turn with them: it is cancelled and
    none of its messages are written (what it spent is accounted, as for any unwritten turn)."""
    queue: asyncio.Queue[LoopEvent | object] = asyncio.Queue()

    async def emit(event: LoopEvent) -> None:
        await queue.put(event)

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        queue.put_nowait(_LEFT)

    task = asyncio.create_task(runtime.run(planned, emit=emit, caller=caller))
    task.add_done_callback(lambda _: queue.put_nowait(_DONE))
    watcher = asyncio.create_task(watch())
    try:
        first = await queue.get()
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.wait({task})
        raise
    finally:
        # Stop watching before the response's own disconnect listener takes the channel.
        watcher.cancel()
        await asyncio.wait({watcher})
    if first is _LEFT:
        task.cancel()
        await asyncio.wait({task})
        return Response(status_code=499)  # nobody is listening: the server drops it
    failure = task.exception() if first is _DONE else None
    if failure is not None:
        raise failure

    async def body() -> AsyncIterator[bytes]:
        item = first
        try:
            while item is not _DONE:
                if item is not _LEFT:
                    yield _event_bytes(item)  # type: ignore[arg-type]
                item = await queue.get()
            exc = task.exception()
            if exc is None and task.result().outcome is None:
                # A suspended turn ends its stream with the requests it waits for.
                yield _sse("awaiting_approval", awaiting_json(task.result().awaiting))
            elif exc is None:
                yield _sse("done", _turn_json(task.result()))
            else:
                yield _sse("error", error_json(exc)[1])
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    return StreamingResponse(body(), media_type="text/event-stream")
