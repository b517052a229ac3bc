"""The gateway's OpenAPI document, written by hand and served at ``GET /openapi.json``.

The gateway is a raw ASGI app (no framework to generate one), so the document is this value.
It describes what the gateway itself reads and answers, not every field the upstream accepts:
a chat body is an object with ``model`` and ``messages`` whose other fields pass through. The
schemathesis run in the tests generates requests from it and asserts no 5xx.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DOCUMENT"]

_ERROR: dict[str, Any] = {
    "description": "an error in OpenAI's shape",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["error"],
                "properties": {
                    "error": {
                        "type": "object",
                        "required": ["message", "type", "code"],
                        "properties": {
                            "message": {"type": "string"},
                            "type": {"type": "string"},
                            "param": {"type": ["string", "null"]},
                            "code": {"type": "string"},
                        },
                    }
                },
            }
        }
    },
}
_ANY_JSON: dict[str, Any] = {"description": "JSON", "content": {"application/json": {}}}
_TEXT: dict[str, Any] = {"description": "text", "content": {"text/plain": {}}}

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


def _responses(*statuses: int) -> dict[str, Any]:
    answers: dict[str, Any] = {"200": _ANY_JSON}
    for status in statuses:
        answers[str(status)] = _ERROR
    return answers


def _get(summary: str, answer: dict[str, Any], *extra: int) -> dict[str, Any]:
    responses = {"200": answer, **{str(s): _ANY_JSON for s in extra}}
    return {"get": {"summary": summary, "responses": responses}}


DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "ankka gateway", "version": "1"},
    "paths": {
        "/v1/chat/completions": {
            "post": {
                "summary": "A chat completion, checked against what the model can do",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _CHAT}},
                },
                "responses": _responses(400, 404, 405, 413, 429, 502, 503, 504),
            }
        },
        "/v1/models": _get("The models served and what each can do", _ANY_JSON),
        "/api/show": {
            "post": {
                "summary": "Ollama's show: one model's capabilities",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {"model": {"type": "string"}},
                            }
                        }
                    },
                },
                "responses": {"200": _ANY_JSON, "400": _ANY_JSON, "404": _ANY_JSON},
            }
        },
        "/healthz": _get("Alive", _ANY_JSON),
        "/readyz": _get("Every model probed", _ANY_JSON, 503),
        "/metrics": _get("Prometheus metrics", _TEXT),
    },
}
