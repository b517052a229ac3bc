"""The stand-in's HTTP app: answers model requests from the script, records what it received.

- ``POST /v1/chat/completions``: the next turn, as JSON or (``"stream": true``) as SSE.
- ``GET /_standin/requests``: what it received, in order (path, selected headers, body, and
  the ticks at which each request arrived and was answered, to show overlap or its absence).
- ``DELETE /_standin/requests``: forget them. ``PUT /_standin/script``: serve a new script.
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
from ankka.runtime.standin import chat_completions
from ankka.runtime.standin.script import Script, ScriptedModel, ScriptTurn, parse_script

__all__ = ["StandinState", "create_app"]

_RECORDED_HEADERS = ("authorization", "content-type", "user-agent")


@dataclass
class StandinState:
    turns: list[ScriptTurn]
    models: dict[str, ScriptedModel] = field(default_factory=dict)
    served: int = 0
    tick: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    used: list[bool] = field(default_factory=list)
    first_unserved: int = 0

    def __post_init__(self) -> None:
        self.used = [False] * len(self.turns)

    def next_tick(self) -> int:
        self.tick += 1
        return self.tick

    def take(self, last_role: str | None) -> tuple[int, ScriptTurn | None]:
        """The first unserved turn that fits the request, and its number (1-based)."""
        number = self.served + 1
        while self.first_unserved < len(self.turns) and self.used[self.first_unserved]:
            self.first_unserved += 1
        for index in range(self.first_unserved, len(self.turns)):
            if not self.used[index] and self.turns[index].fits(last_role):
                self.used[index] = True
                self.served += 1
                return number, self.turns[index]
        return number, None

    def reset(self, turns: list[ScriptTurn]) -> None:
        self.turns = turns
        self.used = [False] * len(turns)
        self.first_unserved = 0
        self.served = 0
        self.requests.clear()


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)


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


def create_app(script: Script, *, model: str = "standin") -> Starlette:
    state = StandinState(list(script.turns), dict(script.models))

    async def chat(request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            return _error(400, "invalid_json", "the request body is not JSON")
        record: dict[str, Any] = {
            "path": request.url.path,
            "headers": {h: request.headers[h] for h in _RECORDED_HEADERS if h in request.headers},
            "body": body,
            "received": state.next_tick(),
            "answered": None,
        }
        state.requests.append(record)
        messages = body.get("messages") if isinstance(body, dict) else None
        last_role = messages[-1].get("role") if isinstance(messages, list) and messages else None
        number, turn = state.take(last_role)
        if turn is None:
            record["answered"] = state.next_tick()
            left = len(state.turns) - state.served
            return _error(
                418,
                "script_exhausted",
                f"the stand-in's script has no turn left for this request: {state.served} of "
                f"{len(state.turns)} turn(s) were served ({left} left, none for a request "
                f"whose last message is from {last_role!r}); this is request {number}",
            )
        if turn.delay_ms:
            await asyncio.sleep(turn.delay_ms / 1000)
        created = int(time.time())
        served_model = str(body.get("model") or model)
        if not body.get("stream"):
            record["answered"] = state.next_tick()
            return JSONResponse(
                chat_completions.answer(turn, model=served_model, number=number, created=created)
            )
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        async def events() -> AsyncIterator[bytes]:
            for chunk in chat_completions.chunks(
                turn,
                model=served_model,
                number=number,
                created=created,
                include_usage=include_usage,
            ):
                yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
            record["answered"] = state.next_tick()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

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

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True, "turns": len(state.turns), "served": state.served})

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/api/show", show, methods=["POST"]),
            Route("/_standin/requests", requests, methods=["GET", "DELETE"]),
            Route("/_standin/script", replace_script, methods=["PUT"]),
            Route("/_standin/health", health, methods=["GET"]),
        ]
    )
    app.state.standin = state
    return app
