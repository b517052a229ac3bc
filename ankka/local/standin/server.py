"""The stand-in's HTTP app: answers model requests from the script, records what it received.

- ``POST /v1/chat/completions`` (OpenAI Chat Completions), ``POST /v1/responses`` (OpenAI
  Responses) and ``POST /v1/messages`` (Anthropic Messages): the next turn of the one script,
  as JSON or (``"stream": true``) as SSE in that endpoint's shape. A turn with ``status``
  answers that HTTP error in the endpoint's error shape. Given an ``api_key``, a request
  whose bearer or ``x-api-key`` differs is answered 401, quoting the credential it was sent (as
  some real servers do, so tests prove ankka hides it). A Responses request that replays a
  reasoning item from before its last user message is answered 400, as OpenAI holds a replay
  to the current turn.
- ``GET /_standin/requests``: what it received, in order (path, selected headers: the
  credentials, content type, user agent and W3C trace context; the body, and
  the ticks at which each request arrived and was answered, to show overlap or its absence).
- ``DELETE /_standin/requests``: forget them. ``PUT /_standin/script``: serve a new script.
- ``GET /v1/models``: the models the script lists (or the one ``--model`` names), as an
  OpenAI-compatible server lists its own.
- ``POST /api/show``: Ollama's answer for a model the script lists under ``models``.
- When no turn is left it answers 418 with a body that says so.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ankka._kernel.errors import ConfigurationError
from ankka.local.standin import anthropic_messages, chat_completions, responses
from ankka.runtime.providers.script import (
    Script,
    ScriptedModel,
    ScriptTurn,
    TurnQueue,
    parse_script,
)

__all__ = ["StandinState", "create_app"]

# The trace context too: the tests read what a caller's trace looked like on arrival.
_RECORDED_HEADERS = (
    "authorization",
    "x-api-key",
    "content-type",
    "user-agent",
    "traceparent",
    "tracestate",
)
_SHAPES = ("chat", "responses", "anthropic")


@dataclass
class StandinState:
    queue: TurnQueue
    models: dict[str, ScriptedModel] = field(default_factory=dict)
    tick: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def turns(self) -> list[ScriptTurn]:
        return self.queue.turns

    @property
    def served(self) -> int:
        return self.queue.served

    def next_tick(self) -> int:
        self.tick += 1
        return self.tick

    def take(
        self, last_role: str | None, call: int | None = None, text: str = ""
    ) -> tuple[int, ScriptTurn | None]:
        """The first unserved turn that fits the request, and its number (1-based)."""
        number = self.queue.served + 1
        return number, self.queue.take(last_role, call, text)

    def reset(self, turns: list[ScriptTurn]) -> None:
        self.queue = TurnQueue(turns)
        self.requests.clear()


def _error(status: int, kind: str, message: str, shape: str = "chat") -> JSONResponse:
    if shape == "anthropic":
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        body = {"error": {"type": kind, "message": message}}
    return JSONResponse(body, status_code=status)


def _authorized(request: Request, api_key: str | None) -> bool:
    if api_key is None:
        return True
    bearer = request.headers.get("authorization", "")
    return bearer == f"Bearer {api_key}" or request.headers.get("x-api-key") == api_key


def _stale_reasoning(body: dict[str, Any]) -> bool:
    """A Responses input replaying a reasoning item from an earlier turn."""
    items = body.get("input")
    if not isinstance(items, list):
        return False
    users = [
        i for i, item in enumerate(items) if isinstance(item, dict) and item.get("role") == "user"
    ]
    last_user = max(users, default=-1)
    return any(
        isinstance(item, dict) and item.get("type") == "reasoning" for item in items[:last_user]
    )


def _call_number(shape: str, body: Any) -> int | None:
    """Which model call of its conversation a request is: 1 + the model's answers it carries."""
    if not isinstance(body, dict):
        return None
    items = body.get("input") if shape == "responses" else body.get("messages")
    if not isinstance(items, list):
        return 1
    answers = 0
    in_answer = False
    for item in items:
        # One answer is a run of assistant items (Responses spreads one over a message and
        # function_call items; the other wires send one assistant message).
        is_answer = isinstance(item, dict) and (
            item.get("role") == "assistant" or item.get("type") == "function_call"
        )
        if is_answer and not in_answer:
            answers += 1
        in_answer = is_answer
    return answers + 1


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _text(body: Any) -> str:
    """A request's instructions and messages, every string in them joined, for ``contains``
    (whatever the wire: ``system``, ``instructions``, ``messages`` or ``input``)."""
    if not isinstance(body, dict):
        return ""
    parts = [body.get(key) for key in ("system", "instructions", "messages", "input")]
    return "\n".join(_strings(parts))


def _last_role(shape: str, body: Any) -> str | None:
    """Who spoke last in a request ("user" or "tool"), whatever the wire, for ``when``."""
    if not isinstance(body, dict):
        return None
    if shape == "responses":
        items = body.get("input")
        if isinstance(items, str):
            return "user"
        if not isinstance(items, list) or not items or not isinstance(items[-1], dict):
            return None
        last = items[-1]
        return "tool" if last.get("type") == "function_call_output" else last.get("role")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    last = messages[-1]
    content = last.get("content")
    if (
        shape == "anthropic"
        and isinstance(content, list)
        and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    ):
        return "tool"
    role = last.get("role")
    return str(role) if role is not None else None


def _sse(events: Any, record: dict[str, Any], state: StandinState, done: bytes) -> Response:
    async def stream() -> AsyncIterator[bytes]:
        for name, data in events:
            head = f"event: {name}\n".encode() if name else b""
            yield head + b"data: " + json.dumps(data).encode() + b"\n\n"
        record["answered"] = state.next_tick()
        if done:
            yield done

    return StreamingResponse(stream(), media_type="text/event-stream")


def _render(
    shape: str, turn: ScriptTurn, body: dict[str, Any], model: str, number: int
) -> dict[str, Any]:
    created = int(time.time())
    if shape == "responses":
        return responses.answer(turn, model=model, number=number, created=created)
    if shape == "anthropic":
        return anthropic_messages.answer(turn, model=model, number=number)
    return chat_completions.answer(turn, model=model, number=number, created=created)


def _stream(
    shape: str, turn: ScriptTurn, body: dict[str, Any], model: str, number: int
) -> tuple[Any, bytes]:
    created = int(time.time())
    if shape == "responses":
        return responses.events(turn, model=model, number=number, created=created), b""
    if shape == "anthropic":
        return anthropic_messages.events(turn, model=model, number=number), b""
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    chunks = chat_completions.chunks(
        turn, model=model, number=number, created=created, include_usage=include_usage
    )
    return (("", c) for c in chunks), b"data: [DONE]\n\n"


def ollama_show(model: ScriptedModel) -> dict[str, Any]:
    """Ollama's ``/api/show`` answer, with the fields ankka reads and a few it does not."""
    body: dict[str, Any] = {
        "capabilities": list(model.capabilities),
        "details": {"format": "gguf", "family": "standin", "parameter_size": "0"},
        "model_info": {"general.architecture": "standin"},
        "modified_at": "2026-01-01T00:00:00Z",
    }
    if model.thinking:
        body["thinking"] = {"values": list(model.thinking)}
    if model.context_length is not None:
        body["model_info"]["standin.context_length"] = model.context_length
    return body


def create_app(script: Script, *, model: str = "standin", api_key: str | None = None) -> Starlette:
    state = StandinState(TurnQueue(list(script.turns)), dict(script.models))

    async def chat(request: Request) -> Response:
        return await answer(request, "chat")

    async def responses_endpoint(request: Request) -> Response:
        return await answer(request, "responses")

    async def messages(request: Request) -> Response:
        return await answer(request, "anthropic")

    async def answer(request: Request, shape: str) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            return _error(400, "invalid_json", "the request body is not JSON", shape)
        record: dict[str, Any] = {
            "path": request.url.path,
            "headers": {h: request.headers[h] for h in _RECORDED_HEADERS if h in request.headers},
            "body": body,
            "received": state.next_tick(),
            "answered": None,
        }
        state.requests.append(record)
        if not _authorized(request, api_key):
            record["answered"] = state.next_tick()
            kind = "authentication_error"
            # Echoed on purpose, as some real servers do: ankka must hide it (issue 13).
            sent = request.headers.get("authorization") or request.headers.get("x-api-key")
            return _error(401, kind, f"the stand-in was given a different API key: {sent}", shape)
        if shape == "responses" and _stale_reasoning(body):
            record["answered"] = state.next_tick()
            return _error(
                400,
                "invalid_request_error",
                "a reasoning item from an earlier turn was replayed; reasoning goes back "
                "within the current turn only",
                shape,
            )
        last_role = _last_role(shape, body)
        number, turn = state.take(last_role, _call_number(shape, body), _text(body))
        if turn is None:
            record["answered"] = state.next_tick()
            left = len(state.turns) - state.served
            return _error(
                418,
                "script_exhausted",
                f"the stand-in's script has no turn left for this request: {state.served} of "
                f"{len(state.turns)} turn(s) were served ({left} left, none for a request "
                f"whose last message is from {last_role!r}); this is request {number}",
                shape,
            )
        if turn.delay_ms:
            await asyncio.sleep(turn.delay_ms / 1000)
        if turn.status is not None:
            record["answered"] = state.next_tick()
            return _error(turn.status, "scripted_error", turn.text or "scripted error", shape)
        served_model = str(body.get("model") or model)
        if not body.get("stream"):
            record["answered"] = state.next_tick()
            return JSONResponse(_render(shape, turn, body, served_model, number))
        events, done = _stream(shape, turn, body, served_model, number)
        return _sse(events, record, state, done)

    async def requests(request: Request) -> Response:
        if request.method == "DELETE":
            state.requests.clear()
            return JSONResponse({"cleared": True})
        return JSONResponse({"requests": state.requests, "served": state.served})

    async def replace_script(request: Request) -> Response:
        try:
            new = parse_script(json.loads(await request.body()))
        except ValueError:
            return _error(400, "invalid_json", "the script is not JSON")
        except ConfigurationError as exc:
            return _error(422, exc.kind, str(exc))
        state.reset(new.turns)
        state.models = new.models
        return JSONResponse({"turns": len(new.turns), "models": sorted(new.models)})

    async def show(request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error(400, "invalid_json", "the request body is not JSON")
        name = body.get("model") if isinstance(body, dict) else None
        state.requests.append(
            {
                "path": request.url.path,
                "headers": {},
                "body": body,
                "received": state.next_tick(),
                "answered": state.next_tick(),
            }
        )
        scripted = state.models.get(str(name))
        if scripted is None:
            # Ollama's own answer for a model it does not have.
            return JSONResponse({"error": f"model '{name}' not found"}, status_code=404)
        return JSONResponse(ollama_show(scripted))

    async def models(request: Request) -> Response:
        # What an OpenAI-compatible server lists: the script's models, else the one it reports.
        names = sorted(state.models) or [model]
        listed = [{"id": n, "object": "model", "owned_by": "ankka-standin"} for n in names]
        return JSONResponse({"object": "list", "data": listed})

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, "turns": len(state.turns), "served": state.served})

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/responses", responses_endpoint, methods=["POST"]),
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/api/show", show, methods=["POST"]),
            Route("/_standin/requests", requests, methods=["GET", "DELETE"]),
            Route("/_standin/script", replace_script, methods=["PUT"]),
            Route("/_standin/health", health, methods=["GET"]),
        ]
    )
    app.state.standin = state
    return app
