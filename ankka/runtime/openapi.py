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
from ankka.runtime.tasks.records import MAX_ID

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


def _id(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": f"1 to {MAX_ID} letters, digits, '_', '.', ':' or '-'",
        "schema": {"type": "string", "minLength": 1, "maxLength": MAX_ID},
    }


def _named(name: str, names: Iterable[str]) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": {"type": "string", "enum": sorted(names) or ["none"]},
    }


def _post(
    summary: str, parameters: list[dict[str, Any]], body: dict[str, Any] | None, *errors: int
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "parameters": parameters,
        "responses": _answers(*errors),
    }
    if body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": body}},
        }
    return operation


_TASK_BODY: dict[str, Any] = {
    "type": "object",
    "required": ["type", "instructions"],
    "additionalProperties": False,
    "properties": {
        "type": {"type": "string", "minLength": 1, "maxLength": MAX_ID},
        "instructions": {"type": "string", "minLength": 1},
        "attachments": {"type": "array"},
        "depends_on": {"type": "array", "items": {"type": "string"}},
        "instance": {"type": "string"},
    },
}
_JUDGMENT_BODY: dict[str, Any] = {
    "type": "object",
    "required": ["text"],
    "additionalProperties": False,
    "properties": {"text": {"type": "string", "minLength": 1}},
}


def _answers(*errors: int) -> dict[str, Any]:
    return {"200": _JSON, **{str(status): _ERROR for status in errors}}


def _get(summary: str, *errors: int, parameters: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    return {
        "get": {"summary": summary, "parameters": list(parameters), "responses": _answers(*errors)}
    }


def document(
    agents: Iterable[str],
    autonomous: Iterable[str] | None = None,
    judgments: Iterable[str] = (),
) -> dict[str, Any]:
    """The OpenAPI document of a runtime serving ``agents``, judgment handlers and, unless
    ``autonomous`` is None (no task host), the task routes of those autonomous agents (their
    notification streams, which never end by themselves, are left out)."""
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
    tasks = {} if autonomous is None else _task_paths(_named("agent", autonomous))
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
            "/v1/agents/{agent}/judgments": {
                "post": _post(
                    "Ask a judgment handler about a text",
                    [_named("agent", judgments)],
                    _JUDGMENT_BODY,
                    400,
                    403,
                    404,
                    413,
                    422,
                    502,
                    504,
                )
            },
            **tasks,
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


def _task_paths(worker: dict[str, Any]) -> dict[str, Any]:
    task, instance = _id("task"), _id("instance")
    return {
        "/v1/agents/{agent}/tasks/{task}": {
            "put": _post(
                "Create a task (again: the same body changes nothing)",
                [worker, task],
                _TASK_BODY,
                400,
                403,
                404,
                409,
                413,
                422,
            )
        },
        "/v1/tasks/{task}": _get("A task's record", 403, 404, 422, parameters=[task]),
        "/v1/tasks/{task}/cancel": {"post": _post("Cancel a task", [task], None, 403, 404, 422)},
        "/v1/agents/{agent}/instances/{instance}": _get(
            "An instance and its queue", 403, 404, 422, parameters=[worker, instance]
        ),
        "/v1/agents/{agent}/instances/{instance}/{operation}": {
            "post": _post(
                "Suspend, resume or terminate an instance",
                [
                    worker,
                    instance,
                    {
                        "name": "operation",
                        "in": "path",
                        "required": True,
                        "schema": {"enum": ["suspend", "resume", "terminate"]},
                    },
                ],
                None,
                403,
                404,
                409,
                422,
            )
        },
    }
