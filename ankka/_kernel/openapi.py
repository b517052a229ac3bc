"""The frame both servers' hand-written OpenAPI documents share (the runtime's and the
gateway's ``GET /openapi.json``): the document's head, the error answer built from each
server's own error fields, the plain answers, a JSON body, and the ways an operation's answers
are listed. What each server serves is its own module's. Pure data; no heavy imports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "JSON",
    "TEXT",
    "answers",
    "document",
    "error_answer",
    "get",
    "json_body",
]

JSON: dict[str, Any] = {"description": "JSON", "content": {"application/json": {}}}
TEXT: dict[str, Any] = {"description": "text", "content": {"text/plain": {}}}


def error_answer(
    description: str, fields: Mapping[str, Any], required: Iterable[str]
) -> dict[str, Any]:
    """An error answer ``{"error": {...fields}}`` in JSON."""
    error = {"type": "object", "required": list(required), "properties": dict(fields)}
    schema = {"type": "object", "required": ["error"], "properties": {"error": error}}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def answers(ok: Mapping[str, Any], error: Mapping[str, Any], *errors: int) -> dict[str, Any]:
    """An operation's answers: ``ok`` for 200, ``error`` for each of ``errors``."""
    return {"200": dict(ok), **{str(status): dict(error) for status in errors}}


def json_body(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A required JSON request body of ``schema``."""
    return {"required": True, "content": {"application/json": {"schema": dict(schema)}}}


def get(
    summary: str, responses: Mapping[str, Any], parameters: Iterable[Any] | None = None
) -> dict[str, Any]:
    """A path with one GET operation (``parameters`` listed when given)."""
    operation: dict[str, Any] = {"summary": summary}
    if parameters is not None:
        operation["parameters"] = list(parameters)
    operation["responses"] = dict(responses)
    return {"get": operation}


def document(title: str, paths: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAPI 3.1 document named ``title``."""
    return {"openapi": "3.1.0", "info": {"title": title, "version": "1"}, "paths": dict(paths)}
