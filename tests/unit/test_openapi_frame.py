"""Both servers' OpenAPI documents are built on one frame (:mod:`ankka._kernel.openapi`): the
same head and the same error envelope, each with its own error fields."""

from __future__ import annotations

from typing import Any

from ankka.gateway.openapi import DOCUMENT
from ankka.runtime.serve.openapi import document


def _error_fields(doc: dict[str, Any], path: str, method: str, status: str) -> dict[str, Any]:
    answer = doc["paths"][path][method]["responses"][status]
    schema = answer["content"]["application/json"]["schema"]
    assert schema["required"] == ["error"]
    error: dict[str, Any] = schema["properties"]["error"]
    return error


def test_both_documents_share_the_head_and_the_error_envelope() -> None:
    runtime = document(["a"], ["r"], ["j"])
    assert runtime["openapi"] == DOCUMENT["openapi"] == "3.1.0"
    assert runtime["info"] == {"title": "ankka runtime", "version": "1"}
    assert DOCUMENT["info"] == {"title": "ankka gateway", "version": "1"}
    mine = _error_fields(runtime, "/v1/agents/{agent}/sessions/{session}", "post", "400")
    theirs = _error_fields(DOCUMENT, "/v1/chat/completions", "post", "400")
    assert mine["required"] == ["type", "message"]
    assert theirs["required"] == ["message", "type", "code"]
    assert runtime["paths"]["/metrics"] == DOCUMENT["paths"]["/metrics"]  # one frame, byte for byte


def test_the_runtime_lists_its_streams_and_approval_routes_and_bounds_the_streams() -> None:
    paths = document(["a"], ["r"])["paths"]
    for path in (
        "/v1/tasks/{task}/notifications",
        "/v1/agents/{agent}/instances/{instance}/notifications",
    ):
        operation = paths[path]["get"]
        [wait] = [p for p in operation["parameters"] if p["name"] == "wait"]
        assert wait["required"] and wait["schema"]["maximum"] <= 5
        assert "text/event-stream" in operation["responses"]["200"]["content"]
    assert "get" in paths["/v1/approvals"] and "post" in paths["/v1/approvals/{approval}"]
    assert "/v1/tasks/{task}/notifications" not in document(["a"])["paths"], "no task host"
