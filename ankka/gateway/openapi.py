"""The gateway's OpenAPI document, served at ``GET /openapi.json``, built from the models of
what it reads and answers (:mod:`ankka.gateway.answers`).

The gateway is its own server, no framework on its hot path (docs/architecture.md), so no
framework generates this: the operations are listed here and every schema in them is a
model's JSON schema, the same models the routes render their answers through. A chat
completion's answer is the upstream's (relayed with its status), so besides the gateway's own
errors it is documented as ``default``. The schemathesis run in the tests generates requests
from it, asserts no 5xx, and checks every answer against it. The head is
:mod:`ankka._kernel.openapi`'s, as the runtime's.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from ankka._kernel.openapi import TEXT, document, json_body
from ankka.gateway.answers import (
    ChatCompletion,
    ChatRequest,
    Health,
    ModelList,
    OpenAIError,
    Readiness,
    Show,
    ShowError,
    ShowRequest,
)

__all__ = ["DOCUMENT"]

_REQUESTS: tuple[type[BaseModel], ...] = (ChatRequest, ShowRequest)
_ANSWERS: tuple[type[BaseModel], ...] = (
    ChatCompletion,
    Health,
    ModelList,
    OpenAIError,
    Readiness,
    Show,
    ShowError,
)
_REF = "#/components/schemas/{model}"
_, _DEFS = models_json_schema(
    [(m, "validation") for m in _REQUESTS] + [(m, "serialization") for m in _ANSWERS],
    ref_template=_REF,
)
_SCHEMAS: dict[str, Any] = _DEFS.get("$defs", {})


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": _REF.format(model=model.__name__)}


def _json(description: str, model: type[BaseModel]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _errors(model: type[BaseModel], **statuses: str) -> dict[str, Any]:
    return {status.removeprefix("s"): _json(words, model) for status, words in statuses.items()}


_CHUNK = {  # one event of a relayed stream: OpenAI's chunks, then ``[DONE]``
    "type": "object",
    "required": ["data"],
    "properties": {"data": {"type": "string"}, "event": {"type": "string"}},
}

DOCUMENT: dict[str, Any] = document(
    "ankka gateway",
    {
        "/v1/chat/completions": {
            "post": {
                "summary": "A chat completion, checked against what the model can do",
                "operationId": "create_chat_completion",
                "requestBody": json_body(_ref(ChatRequest)),
                "responses": {
                    "200": {
                        "description": "the upstream's answer, or its stream relayed",
                        "content": {
                            "application/json": {"schema": _ref(ChatCompletion)},
                            "text/event-stream": {"schema": _CHUNK},
                        },
                    },
                    **_errors(
                        OpenAIError,
                        s400="the request cannot be read, or asks what the model cannot do",
                        s403="the caller is unidentified, or may not use this model",
                        s404="no such model",
                        s413="the body is larger than --max-body-bytes",
                        s429="the caller's share, or the model's, is spent; see Retry-After",
                        s502="the model's server failed",
                        s503="the model is not ready, or its server is unreachable",
                        s504="the model's server did not answer in time",
                    ),
                    "default": {
                        "description": "the upstream's own answer, relayed with its status",
                        "content": {"application/json": {}},
                    },
                },
            }
        },
        "/v1/models": {
            "get": {
                "summary": "The models the caller may use and what each can do",
                "operationId": "list_models",
                "responses": {
                    "200": _json("the models the caller may use", ModelList),
                    **_errors(OpenAIError, s403="the caller is unidentified"),
                },
            }
        },
        "/api/show": {
            "post": {
                "summary": "Ollama's show: one model's capabilities",
                "operationId": "show_model",
                "requestBody": json_body(_ref(ShowRequest)),
                "responses": {
                    "200": _json("the model's capabilities", Show),
                    **_errors(
                        ShowError,
                        s400="the body is not a JSON object naming a model",
                        s403="the caller is unidentified, or may not use this model",
                        s404="no such model",
                        s503="the model is not probed yet",
                    ),
                },
            }
        },
        "/healthz": {
            "get": {
                "summary": "Alive",
                "operationId": "healthz",
                "responses": {"200": _json("alive", Health)},
            }
        },
        "/readyz": {
            "get": {
                "summary": "Every model probed",
                "operationId": "readyz",
                "responses": {
                    "200": _json("every model probed", Readiness),
                    "503": _json("not every model probed yet (which, and why)", Readiness),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics",
                "operationId": "metrics",
                "responses": {"200": TEXT},
            }
        },
    },
    components={"schemas": _SCHEMAS},
)
