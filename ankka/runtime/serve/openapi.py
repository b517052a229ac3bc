"""The runtime's OpenAPI document, served at ``GET /openapi.json``.

Written here rather than generated: the routes are few, and the document names what a caller
can rely on (the body's one field, the session-id rule, the error shape). The agents a service
declares are listed as the ``{agent}`` values. The frame (head, error answer, plain answers)
is :mod:`ankka._kernel.openapi`, shared with the gateway's. The schemathesis run in the tests
generates requests from it and asserts that none is answered with a 5xx.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ankka._kernel import openapi as frame
from ankka.runtime.declare.mcp import CALLBACK_PATH
from ankka.runtime.records.tasks import MAX_ID
from ankka.runtime.serve.approvals_http import STATES
from ankka.runtime.serve.bounds import MAX_SESSION_ID

__all__ = ["document"]

_ERROR = frame.error_answer(
    "an error", {"type": {"type": "string"}, "message": {"type": "string"}}, ["type", "message"]
)
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
        operation["requestBody"] = frame.json_body(body)
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
    return frame.answers(frame.JSON, _ERROR, *errors)


def _get(summary: str, *errors: int, parameters: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    return frame.get(summary, _answers(*errors), parameters)


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "description": description, "schema": schema}


# What a write that records something can be refused with.
_WRITE_ERRORS = (400, 403, 404, 409, 413, 422)
_DECISION_BODY: dict[str, Any] = {
    "type": "object",
    "required": ["decision", "digest"],
    "additionalProperties": False,
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "refuse"]},
        "digest": {"type": "string", "minLength": 64, "maxLength": 64},
        "reason": {"type": "string", "maxLength": 2000},
    },
}
_HTML: dict[str, Any] = {"description": "a page for the person", "content": {"text/html": {}}}
_OAUTH_CALLBACK: dict[str, Any] = frame.get(
    "Where an authorization server sends a person back after consenting for an MCP server",
    frame.answers(_HTML, _HTML, 400, 404),
    [
        _query("state", {"type": "string"}, "the consent this answers"),
        _query("code", {"type": "string"}, "the authorization code"),
        _query("iss", {"type": "string"}, "the authorization server (RFC 9207)"),
        _query("error", {"type": "string"}, "the authorization server's refusal"),
    ],
)
# A stream ends by itself only with its task: the document asks for ``wait`` so a generated
# request ends too (the server takes a request without it and streams until the task ends).
_WAIT = {
    **_query(
        "wait",
        {"type": "number", "minimum": 0, "maximum": 2},
        "end the stream after this many seconds (the server takes 0 to 300, or none)",
    ),
    "required": True,
}
_STREAM: dict[str, Any] = {
    "description": "server-sent events: a snapshot, then the events",
    "content": {"text/event-stream": {}},
}


def _stream(summary: str, parameters: list[dict[str, Any]]) -> dict[str, Any]:
    return frame.get(summary, {**_answers(400, 403, 404, 422), "200": _STREAM}, parameters)


_APPROVALS: dict[str, Any] = {
    "/v1/approvals": _get(
        "The approvals of the sessions the caller may read",
        400,
        parameters=[
            _query("session", {"type": "string"}, "only this session's"),
            _query("agent", {"type": "string"}, "only this agent's"),
            _query("state", {"type": "string", "enum": list(STATES)}, "only those in this state"),
        ],
    ),
    "/v1/approvals/notifications": _stream(
        "Pending approvals (snapshot), then approval events of sessions the caller may read",
        [
            _query("session", {"type": "string"}, "only this session's"),
            _query("agent", {"type": "string"}, "only this agent's"),
            # It never ends by itself: a generated request must end soon (schemathesis).
            {**_WAIT, "schema": {"type": "number", "minimum": 0, "maximum": 0.25}},
        ],
    ),
    "/v1/approvals/{approval}": {
        "post": _post(
            "Approve or refuse a pending tool call (the decide right over its session)",
            [{"name": "approval", "in": "path", "required": True, "schema": {"type": "string"}}],
            _DECISION_BODY,
            *_WRITE_ERRORS,
        )
    },
}


def document(
    agents: Iterable[str],
    autonomous: Iterable[str] | None = None,
    judgments: Iterable[str] = (),
) -> dict[str, Any]:
    """The OpenAPI document of a runtime serving ``agents``, judgment handlers and, unless
    ``autonomous`` is None (no task host), the task routes of those autonomous agents, their
    notification streams included (bounded by ``wait``); and the approval routes."""
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
            "requestBody": frame.json_body(
                {
                    "type": "object",
                    "required": ["message"],
                    "additionalProperties": False,
                    "properties": {"message": {"type": "string", "minLength": 1}},
                }
            ),
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
    return frame.document(
        "ankka runtime",
        {
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
            **_APPROVALS,
            CALLBACK_PATH: _OAUTH_CALLBACK,
            "/metrics": frame.get("Prometheus metrics", {"200": frame.TEXT}),
        },
    )


def _task_paths(worker: dict[str, Any]) -> dict[str, Any]:
    task, instance = _id("task"), _id("instance")
    return {
        "/v1/agents/{agent}/tasks/{task}": {
            "put": _post(
                "Create a task (again: the same body changes nothing)",
                [worker, task],
                _TASK_BODY,
                *_WRITE_ERRORS,
            )
        },
        "/v1/tasks/{task}": _get("A task's record", 403, 404, 422, parameters=[task]),
        "/v1/tasks/{task}/cancel": {"post": _post("Cancel a task", [task], None, 403, 404, 422)},
        "/v1/tasks/{task}/notifications": _stream("A task's events", [task, _WAIT]),
        "/v1/agents/{agent}/instances/{instance}/notifications": _stream(
            "An instance's events", [worker, instance, _WAIT]
        ),
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
