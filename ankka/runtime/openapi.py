"""The runtime's OpenAPI document, served at ``GET /openapi.json``.

Written here rather than generated: the routes are few, and the document names what a caller
can rely on (the body's one field, the session-id rule, the error shape). The agents a service
declares are listed as the ``{agent}`` values. The schemathesis run in the tests generates
requests from it and asserts that none is answered with a 5xx.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ankka.runtime.bounds import MAX_SESSION_ID

__all__ = ["document"]

_ERROR: dict[str, Any] = {
    "description": "an error",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["error"],
                "properties": {
                    "error": {
                        "type": "object",
                        "required": ["type", "message"],
                        "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
                    }
                },
            }
        }
    },
}
_JSON: dict[str, Any] = {"description": "JSON", "content": {"application/json": {}}}
_SESSION: dict[str, Any] = {
    "name": "session",
    "in": "path",
    "required": True,
    "description": f"1 to {MAX_SESSION_ID} characters of UTF-8, no '/' or control characters",
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_SESSION_ID},
}


def _answers(*errors: int) -> dict[str, Any]:
    return {"200": _JSON, **{str(status): _ERROR for status in errors}}


def _get(summary: str, *errors: int, parameters: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    return {
        "get": {"summary": summary, "parameters": list(parameters), "responses": _answers(*errors)}
    }


def document(agents: Iterable[str]) -> dict[str, Any]:
    """The OpenAPI document of a runtime serving ``agents``."""
    agent = {
        "name": "agent",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "enum": sorted(agents) or ["none"]},
    }
    turn = {
        "post": {
            "summary": "Run one turn of an agent in a session",
            "parameters": [agent, _SESSION],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["message"],
                            "additionalProperties": False,
                            "properties": {"message": {"type": "string", "minLength": 1}},
                        }
                    }
                },
            },
            "responses": {
                **_answers(400, 403, 404, 413, 422, 502, 504),
                "200": {
                    "description": "the reply (or server-sent events for a stream agent)",
                    "content": {"application/json": {}, "text/event-stream": {}},
                },
            },
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "ankka runtime", "version": "1"},
        "paths": {
            "/v1/agents/{agent}/sessions/{session}": turn,
            "/v1/sessions/{session}/messages": _get(
                "A session's conversation", 400, parameters=[_SESSION]
            ),
            "/v1/sessions/{session}": _get("A session's summary", 400, parameters=[_SESSION]),
            "/v1/sessions/{session}/calls": _get(
                "Every model call of a session, written or not", 400, parameters=[_SESSION]
            ),
            "/v1/agents": _get("The declared agents"),
            "/healthz": _get("Alive"),
            "/readyz": _get("Ready"),
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics",
                    "responses": {"200": {"description": "text", "content": {"text/plain": {}}}},
                }
            },
        },
    }
