"""The runtime's HTTP API. Thin: parse, call the :class:`~ankka.runtime.host.Runtime`, render.

- ``POST /v1/agents/{agent}/sessions/{session}`` ``{"message": "..."}`` →
  ``{"reply", "usage", "cost", "turn", "model_calls"}``; stream-shaped agents answer as
  server-sent events (``delta``, ``tool_call``, ``tool_result``, then ``done`` or ``error``).
- ``GET /v1/sessions/{session}/messages``: the conversation.
- ``GET /v1/sessions/{session}``: counts, token totals, requests pending.
- ``GET /v1/agents``, ``GET /healthz``, ``GET /readyz``, ``GET /metrics``.
- The task routes (autonomous agents), from :mod:`ankka.runtime.tasks.http`.

Every error is ``{"error": {"type", "message"}}`` with the status of its class.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ankka._kernel.errors import AnkkaError, InvalidJSON, RequestError
from ankka.runtime.agents import Turn
from ankka.runtime.host import Runtime, TurnResult
from ankka.runtime.loop import LoopEvent
from ankka.runtime.messages import (
    AssistantMessage,
    Message,
    SummaryMessage,
    ToolCall,
    ToolResult,
    UserMessage,
)
from ankka.runtime.providers.base import ModelProvider, TextDelta
from ankka.runtime.tasks.host import TaskHost
from ankka.runtime.tasks.http import task_routes

__all__ = ["create_app", "render_message"]

log = logging.getLogger("ankka.runtime")

COST_UNKNOWN = "unknown"  # tokens are counted; money is not (there is no price table)


class TurnBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str = Field(min_length=1)


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)


def _from_exception(exc: Exception) -> JSONResponse:
    if isinstance(exc, AnkkaError):
        return _error(exc.status, exc.kind, str(exc))
    log.exception("unexpected failure")
    return _error(500, "internal_error", "the runtime failed unexpectedly; see its log")


async def _parse(request: Request) -> TurnBody:
    raw = await request.body()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InvalidJSON(f"the body is not valid JSON: {exc}") from exc
    try:
        return TurnBody.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise RequestError(f'the body does not fit {{"message": "..."}}: {problems}') from exc


def _turn_json(result: TurnResult) -> dict[str, Any]:
    outcome = result.outcome
    return {
        "reply": result.reply,
        "usage": outcome.usage.as_dict(),
        "cost": COST_UNKNOWN,
        "turn": outcome.turn,
        "model_calls": [c.as_dict() for c in outcome.calls],
    }


def render_message(message: Message) -> dict[str, Any]:
    data: dict[str, Any]
    if isinstance(message, UserMessage):
        data = {"role": "user", "content": message.content}
    elif isinstance(message, AssistantMessage):
        data = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            data["tool_calls"] = [_call_json(c) for c in message.tool_calls]
        if message.call is not None:
            data["model_call"] = message.call.as_dict()
        if message.turn_usage is not None:
            data["usage"] = message.turn_usage.as_dict()
    elif isinstance(message, ToolResult):
        data = {
            "role": "tool",
            "tool_call_id": message.call_id,
            "name": message.name,
            "content": message.content,
            "is_error": message.is_error,
        }
    elif isinstance(message, SummaryMessage):
        data = {"role": "summary", "content": message.content, "replaces": message.replaces}
    data["agent"] = message.agent
    data["turn"] = message.turn
    return data


def _call_json(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def _sse(event: str, data: object) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _event_bytes(event: LoopEvent) -> bytes:
    if isinstance(event, TextDelta):
        return _sse("delta", {"text": event.text})
    if isinstance(event, ToolCall):
        return _sse("tool_call", _call_json(event))
    return _sse("tool_result", render_message(event))


def create_app(runtime: Runtime, tasks: TaskHost | None = None) -> Starlette:
    """The runtime's app; with ``tasks``, also the task routes (``ankka.runtime.tasks.http``)."""

    async def turn(request: Request) -> Response:
        agent = request.path_params["agent"]
        session = request.path_params["session"]
        try:
            body = await _parse(request)
            planned = runtime.plan(agent, session, body.message)
            if planned[0].streams:
                return await _stream(runtime, agent, session, body.message, planned)
            result = await runtime.run(agent, session, body.message, planned=planned)
        except Exception as exc:
            return _from_exception(exc)
        return JSONResponse(_turn_json(result))

    async def messages(request: Request) -> Response:
        session = request.path_params["session"]
        try:
            conversation = await runtime.messages(session)
        except Exception as exc:
            return _from_exception(exc)
        return JSONResponse(
            {"session": session, "messages": [render_message(m) for m in conversation]}
        )

    async def session_summary(request: Request) -> Response:
        try:
            summary = await runtime.summary(request.path_params["session"])
        except Exception as exc:
            return _from_exception(exc)
        return JSONResponse(
            {
                "session": summary.session,
                "messages": summary.messages,
                "turns": summary.turns,
                "pending": summary.pending,
                "usage": summary.usage.as_dict(),
                "cost": COST_UNKNOWN,
            }
        )

    async def agents(request: Request) -> Response:
        declared = runtime.service.agents
        autonomous = runtime.service.autonomous_agents
        return JSONResponse(
            {
                "agents": [
                    *(
                        {"name": n, "description": d.description, "kind": "request"}
                        for n, d in declared.items()
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
                        for n, a in autonomous.items()
                    ),
                ]
            }
        )

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def metrics(request: Request) -> Response:
        return Response(runtime.metrics.render(), media_type="text/plain; version=0.0.4")

    task_routes_: list[Route] = task_routes(tasks, _from_exception) if tasks is not None else []
    return Starlette(
        routes=[
            *task_routes_,
            Route("/v1/agents/{agent}/sessions/{session}", turn, methods=["POST"]),
            Route("/v1/sessions/{session}/messages", messages, methods=["GET"]),
            Route("/v1/sessions/{session}", session_summary, methods=["GET"]),
            Route("/v1/agents", agents, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", healthz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ]
    )


_DONE = object()


async def _stream(
    runtime: Runtime,
    agent: str,
    session: str,
    message: str,
    planned: tuple[Turn, ModelProvider],
) -> Response:
    """Answer a stream-shaped agent as SSE. A failure before the first event is answered as an
    ordinary JSON error (a guardrail refusal is a 403, not a 200 with an error inside)."""
    queue: asyncio.Queue[LoopEvent | object] = asyncio.Queue()

    async def emit(event: LoopEvent) -> None:
        await queue.put(event)

    task = asyncio.create_task(runtime.run(agent, session, message, emit=emit, planned=planned))
    task.add_done_callback(lambda _: queue.put_nowait(_DONE))
    try:
        first = await queue.get()
    except asyncio.CancelledError:
        # The caller left before the first event: the turn is theirs, so it goes too.
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise
    if first is _DONE and task.exception() is not None:
        exc = task.exception()
        assert isinstance(exc, Exception)
        return _from_exception(exc)

    async def body() -> AsyncIterator[bytes]:
        item = first
        try:
            while item is not _DONE:
                yield _event_bytes(item)  # type: ignore[arg-type]
                item = await queue.get()
            exc = task.exception()
            if exc is None:
                yield _sse("done", _turn_json(task.result()))
            else:
                yield _sse("error", _error_json(exc))
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    return StreamingResponse(body(), media_type="text/event-stream")


def _error_json(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, AnkkaError):
        return {"error": {"type": exc.kind, "message": str(exc)}}
    log.error("unexpected failure in a streamed turn", exc_info=exc)
    return {"error": {"type": "internal_error", "message": "the runtime failed unexpectedly"}}
