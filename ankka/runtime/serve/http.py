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
- ``GET /v1/agents``, ``GET /healthz``, ``GET /metrics``, and ``GET /openapi.json``
  (:mod:`ankka.runtime.serve.openapi`).
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

Every error is ``{"error": {"type", "message"}}`` with the status of its class, a 404 or
405 from routing included (a 405 names the allowed methods in ``Allow``). Input is bounded
in front of the routes (:mod:`ankka.runtime.serve.bounds`): body size, session-id form, and a
caller who leaves mid-body is counted, not logged as a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from ankka._kernel.errors import AnkkaError, RequestError, StoreError
from ankka._kernel.exposition import CONTENT_TYPE
from ankka.runtime.drivers.request import Runtime, TurnResult
from ankka.runtime.drivers.tasks.host import TaskHost
from ankka.runtime.engine.executor import LoopEvent
from ankka.runtime.engine.loop import TurnOutcome
from ankka.runtime.engine.planning import PlannedTurn
from ankka.runtime.providers.base import TextDelta
from ankka.runtime.records.messages import ToolCall
from ankka.runtime.serve.a2a.service import A2AService
from ankka.runtime.serve.approvals_http import approval_routes, awaiting_json
from ankka.runtime.serve.bodies import parse_body
from ankka.runtime.serve.bounds import DEFAULT_MAX_BODY, BoundedInput
from ankka.runtime.serve.identity import Identify, caller_of
from ankka.runtime.serve.mcp_routes import mcp_routes
from ankka.runtime.serve.openapi import document
from ankka.runtime.serve.tasks_http import task_routes

__all__ = ["create_app"]

log = logging.getLogger("ankka.runtime")

COST_UNKNOWN = "unknown"  # tokens are counted; money is not (there is no price table)


class TurnBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str = Field(min_length=1)


_ROUTING = {404: "not_found", 405: "method_not_allowed"}


def error_json(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The one mapping from an exception to the API's error: its status and its body."""
    if isinstance(exc, AnkkaError):
        return exc.status, {"error": {"type": exc.kind, "message": str(exc)}}
    if isinstance(exc, HTTPException) and exc.status_code in _ROUTING:
        kind = _ROUTING[exc.status_code]
        allow = (exc.headers or {}).get("Allow")
        message = f"use {allow} here" if allow else "no such endpoint; see GET /openapi.json"
        return exc.status_code, {"error": {"type": kind, "message": message}}
    log.error("unexpected failure", exc_info=exc)
    message = "the runtime failed unexpectedly; see its log"
    return 500, {"error": {"type": "internal_error", "message": message}}


async def _error_response(request: Request, exc: Exception) -> Response:
    status, body = error_json(exc)
    headers = dict(exc.headers or {}) if isinstance(exc, HTTPException) else {}  # Allow (405)
    if isinstance(exc, AnkkaError) and exc.retry_after is not None:
        # A store outage, a caller over its TokenReview rate: try again then (whole seconds).
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    if isinstance(exc, StoreError) and status >= 500:
        # A dependency's failure, said in one line: the store names itself and what to do.
        log.warning("%s %s: %s", request.method, request.url.path, exc)
    return JSONResponse(body, status_code=status, headers=headers or None)


# Every route's errors are answered here. An ExceptionMiddleware of our own, not Starlette's
# ``exception_handlers={Exception: ...}``: Starlette sends that one from ServerErrorMiddleware,
# which re-raises after answering, so the server would log the failure twice and close the
# caller's connection.
_ERRORS = Middleware(ExceptionMiddleware, handlers={Exception: _error_response})


MAX_JUDGMENT_TEXT = 32_000


class JudgmentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=MAX_JUDGMENT_TEXT)


Body = TypeVar("Body", bound=BaseModel)


async def _parse(request: Request, shape: type[Body]) -> Body:
    field = next(iter(shape.model_fields))
    return parse_body(await request.body(), shape, f'{{"{field}": "..."}}')


def _flag(request: Request, name: str) -> bool:
    raw = request.query_params.get(name, "false").lower()
    if raw not in ("true", "false", "1", "0"):
        raise RequestError(f"?{name}= takes true or false, not {raw[:40]!r}")
    return raw in ("true", "1")


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


def _caller(request: Request) -> str:
    """Who is calling, as the identity layer named them (:mod:`ankka.runtime.serve.identity`)."""
    return caller_of(request.scope)


def create_app(
    runtime: Runtime,
    tasks: TaskHost | None = None,
    *,
    max_body: int = DEFAULT_MAX_BODY,
    identify: Identify | None = None,
    approver_header: str | None = None,
    console: bool = False,
    a2a: A2AService | None = None,
) -> BoundedInput:
    """The API of ``runtime``; with ``tasks``, also the task routes
    (:mod:`ankka.runtime.serve.tasks_http`). Without ``identify`` every caller is ``local``.
    ``approver_header`` names the header a trusted proxy sets to say who decides an approval
    (``ankka.runtime.serve.approvals_http``). With ``console``, the console's pages at ``/console``
    (:mod:`ankka.runtime.serve.console`). With ``a2a`` (entered by its owner), every agent
    also at ``/a2a/{agent}`` (:mod:`ankka.runtime.serve.a2a`)."""

    async def turn(request: Request) -> Response:
        body = await _parse(request, TurnBody)
        planned = runtime.plan(
            request.path_params["agent"], request.path_params["session"], body.message
        )
        caller = _caller(request)
        if planned.streams:
            return await _stream(runtime, planned, request, caller)
        result = await runtime.run(planned, caller=caller)
        if result.outcome is None:
            return JSONResponse(awaiting_json(result.awaiting), status_code=202)
        return JSONResponse(_turn_json(result))

    async def judgments(request: Request) -> Response:
        body = await _parse(request, JudgmentBody)
        judgment = await runtime.judge(request.path_params["agent"], body.text)
        return JSONResponse(judgment.as_dict())

    async def messages(request: Request) -> Response:
        session = request.path_params["session"]
        as_sent = _flag(request, "as_sent")
        conversation = await runtime.messages(session, as_sent=as_sent, caller=_caller(request))
        return JSONResponse(
            {
                "session": session,
                "as_sent": as_sent,
                "messages": [m.as_dict() for m in conversation],
            }
        )

    async def session_summary(request: Request) -> Response:
        summary = await runtime.summary(request.path_params["session"], caller=_caller(request))
        return JSONResponse(
            {
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
            }
        )

    async def calls(request: Request) -> Response:
        session = request.path_params["session"]
        found = await runtime.calls(session, caller=_caller(request))
        return JSONResponse(
            {
                "session": session,
                "calls": [
                    {**call.as_dict(), "turn": turn, "written": why is None, "reason": why}
                    for call, turn, why in found
                ],
            }
        )

    async def agents(request: Request) -> Response:
        service = runtime.service
        return JSONResponse(
            {
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
        )

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    service = runtime.service
    published = document(
        service.agents,
        service.autonomous_agents if tasks is not None else None,
        service.judgments,
    )

    async def openapi(request: Request) -> Response:
        return JSONResponse(published)

    async def readyz(request: Request) -> Response:
        # Not ready while a declared MCP server has no session: its tools would be missing.
        # Ready, with ``detail``, while a server's listing left tools out or its last good
        # listing is served because refreshing it fails.
        missing = runtime.missing()
        mcp = runtime.context.mcp
        detail = mcp.detail() if mcp is not None else {}
        body: dict[str, Any] = {"ok": not missing}
        if missing:
            body["missing"] = missing
        if detail:
            body["detail"] = detail
        return JSONResponse(body, status_code=503 if missing else 200)

    async def metrics(request: Request) -> Response:
        return Response(runtime.metrics.render(), media_type=CONTENT_TYPE)

    pages: list[BaseRoute] = []
    if console:
        from ankka.runtime.serve.console.routes import console_routes

        pages = console_routes(runtime, tasks)
    pages = [*pages, *mcp_routes(runtime.context.mcp, console=console)]
    routes = Starlette(
        routes=[
            *pages,
            *(a2a.routes() if a2a is not None else ()),
            *(task_routes(tasks, runtime.policy) if tasks is not None else ()),
            *approval_routes(runtime, _outcome_json, approver_header=approver_header, tasks=tasks),
            Route("/v1/agents/{agent}/sessions/{session}", turn, methods=["POST"]),
            Route("/v1/agents/{agent}/judgments", judgments, methods=["POST"]),
            Route("/v1/sessions/{session}/messages", messages, methods=["GET"]),
            Route("/v1/sessions/{session}", session_summary, methods=["GET"]),
            Route("/v1/sessions/{session}/calls", calls, methods=["GET"]),
            Route("/v1/agents", agents, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/openapi.json", openapi, methods=["GET"]),
        ],
        middleware=[_ERRORS],
        # Routing's 404 and 405 are answered by Starlette's own inner handler: ours, in shape.
        exception_handlers={HTTPException: _error_response},
    )
    return BoundedInput(
        routes, max_body=max_body, on_caller_left=runtime.metrics.caller_left, identify=identify
    )


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
