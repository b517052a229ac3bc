"""The gateway's OpenAPI document, written by hand and served at ``GET /openapi.json``.

The gateway is a raw ASGI app (no framework to generate one), so the document is this value.
The frame (head, error answer, plain answers) is :mod:`ankka._kernel.openapi`, shared with
the runtime's. It describes what the gateway itself reads and answers, not every field the
upstream accepts: a chat body is an object with ``model`` and ``messages`` whose other fields
pass through. The schemathesis run in the tests generates requests from it and asserts no 5xx.
"""

from __future__ import annotations

from typing import Any

from ankka._kernel.openapi import JSON, TEXT, answers, document, error_answer, get, json_body

__all__ = ["DOCUMENT"]

_ERROR = error_answer(
    "an error in OpenAI's shape",
    {
        "message": {"type": "string"},
        "type": {"type": "string"},
        "param": {"type": ["string", "null"]},
        "code": {"type": "string"},
    },
    ["message", "type", "code"],
)

# The fields the gateway's checks read are typed as OpenAI types them, so schemathesis's coverage
# phase also sends each one wrongly typed (an object for an effort, ...): every such request
# must be a 400, never a 5xx.
_CONTENT_PART: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "examples": ["text", "image_url"]},
        "text": {"type": "string"},
        "image_url": {"type": "object", "properties": {"url": {"type": "string"}}},
    },
}
_MESSAGE: dict[str, Any] = {
    "type": "object",
    "required": ["role", "content"],
    "properties": {
        "role": {"type": "string", "enum": ["system", "user", "assistant", "tool"]},
        "content": {"oneOf": [{"type": "string"}, {"type": "array", "items": _CONTENT_PART}]},
    },
}
_CHAT: dict[str, Any] = {
    "type": "object",
    "required": ["model", "messages"],
    "properties": {
        "model": {"type": "string", "examples": ["small"]},
        "messages": {"type": "array", "items": _MESSAGE},
        "stream": {"type": "boolean"},
        "tools": {"type": "array", "items": {"type": "object"}},
        "reasoning_effort": {"type": "string", "examples": ["low", "high"]},
        "reasoning": {"type": "object", "properties": {"effort": {"type": "string"}}},
        "stream_options": {"type": "object"},
    },
}


def _get(summary: str, answer: dict[str, Any], *extra: int) -> dict[str, Any]:
    return get(summary, answers(answer, JSON, *extra))


DOCUMENT: dict[str, Any] = document(
    "ankka gateway",
    {
        "/v1/chat/completions": {
            "post": {
                "summary": "A chat completion, checked against what the model can do",
                "requestBody": json_body(_CHAT),
                "responses": answers(JSON, _ERROR, 400, 403, 404, 405, 413, 429, 502, 503, 504),
            }
        },
        "/v1/models": get(
            "The models the caller may use and what each can do", answers(JSON, _ERROR, 403)
        ),
        "/api/show": {
            "post": {
                "summary": "Ollama's show: one model's capabilities",
                "requestBody": json_body(
                    {"type": "object", "properties": {"model": {"type": "string"}}}
                ),
                "responses": answers(JSON, JSON, 400, 403, 404),
            }
        },
        "/healthz": _get("Alive", JSON),
        "/readyz": _get("Every model probed", JSON, 503),
        "/metrics": _get("Prometheus metrics", TEXT),
    },
)
