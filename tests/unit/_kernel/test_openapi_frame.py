"""The two OpenAPI documents: the runtime's is FastAPI's, built from the models its routes
send (:mod:`ankka.runtime.serve.wire`); the gateway's is its own. Both share the head; each
names every status an operation answers, with a schema for every JSON answer, and an
``operationId`` a client generator names its functions by."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from ankka.gateway.answers import Health, OpenAIError, Readiness, ShowError
from ankka.gateway.app import Gateway
from ankka.gateway.models_file import Models
from ankka.gateway.openapi import DOCUMENT
from ankka.gateway.wire import error_body
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.serve.http import create_app
from tests.support.runtimes import runtime_for
from tests.support.stores import journal_store


def _service() -> Service:
    declared = Service("doc")

    @declared.agent("weather")
    def weather(request: TurnRequest) -> Turn:
        return Turn(message=request.message)

    @declared.agent("chat")
    def chat(request: TurnRequest) -> Turn:
        return Turn(message=request.message)

    return declared


async def _runtime_document(tmp_path: Path) -> dict[str, Any]:
    store = await journal_store(tmp_path / "s.sqlite3")
    async with store, runtime_for(_service(), store=store, providers={}) as runtime:
        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            answer = await http.get("/openapi.json")
    assert answer.status_code == 200
    document: dict[str, Any] = answer.json()
    return document


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


async def test_both_documents_share_the_head(tmp_path: Path) -> None:
    runtime = await _runtime_document(tmp_path)
    assert runtime["openapi"] == DOCUMENT["openapi"] == "3.1.0"
    assert runtime["info"] == {"title": "ankka runtime", "version": "1"}
    assert DOCUMENT["info"] == {"title": "ankka gateway", "version": "1"}


async def test_every_runtime_operation_is_named_and_every_json_answer_has_a_schema(
    tmp_path: Path,
) -> None:
    document = await _runtime_document(tmp_path)
    operations = _operations(document)
    names = [operation["operationId"] for _, _, operation in operations]
    assert len(names) == len(set(names)) == len(operations)
    unschematised = [
        f"{method} {path} {status}"
        for path, method, operation in operations
        for status, answer in operation["responses"].items()
        for media, content in answer.get("content", {}).items()
        if media == "application/json" and not content.get("schema")
    ]
    assert unschematised == []
    errors = [
        answer["content"]["application/json"]["schema"]
        for _, _, operation in operations
        for status, answer in operation["responses"].items()
        if status.startswith(("4", "5"))
        and not (status == "503" and "NotReady" in str(answer))
        and "text/html" not in answer["content"]  # the OAuth callback's pages, for a person
    ]
    assert errors and all(e == {"$ref": "#/components/schemas/Error"} for e in errors)
    error = document["components"]["schemas"]["ErrorDetail"]
    assert error["required"] == ["type", "message"]
    assert "HTTPValidationError" not in document["components"]["schemas"]  # ankka's 422 only


async def test_the_runtime_lists_each_status_a_route_answers_and_the_agents_it_serves(
    tmp_path: Path,
) -> None:
    paths = (await _runtime_document(tmp_path))["paths"]
    turn = paths["/v1/agents/{agent}/sessions/{session}"]["post"]
    assert {"200", "202", "409", "500"} <= set(turn["responses"])
    assert set(turn["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert turn["responses"]["202"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Awaiting"
    }
    [agent] = [p for p in turn["parameters"] if p["name"] == "agent"]
    assert agent["schema"]["enum"] == ["chat", "weather"]
    ready = paths["/readyz"]["get"]["responses"]
    assert ready["503"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/NotReady"
    }
    stream = paths["/v1/approvals/notifications"]["get"]
    [wait] = [p for p in stream["parameters"] if p["name"] == "wait"]
    assert not wait.get("required") and wait["schema"]["anyOf"][0]["maximum"] == 300
    assert "text/event-stream" in stream["responses"]["200"]["content"]
    assert "/v1/tasks/{task}" not in paths, "no task host, no task routes"


def test_every_gateway_operation_is_named_and_every_json_answer_has_a_schema() -> None:
    operations = _operations(DOCUMENT)
    names = [operation["operationId"] for _, _, operation in operations]
    assert len(names) == len(set(names)) == len(operations) == 6
    for path, method, operation in operations:
        for status, answer in operation["responses"].items():
            content = answer.get("content", {})
            if status != "default" and "application/json" in content:
                assert content["application/json"].get("schema"), f"{method} {path} {status}"
    refs = {ref.rsplit("/", 1)[1] for ref in _refs(DOCUMENT["paths"])}
    assert refs <= set(DOCUMENT["components"]["schemas"])


def _refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        found = [value["$ref"]] if "$ref" in value else []
        return found + [r for v in value.values() for r in _refs(v)]
    if isinstance(value, list):
        return [r for v in value for r in _refs(v)]
    return []


def test_the_gateways_own_answers_fit_the_models_its_document_is_built_from() -> None:
    error = OpenAIError.model_validate_json(error_body(429, "slow down", code="rate_limited"))
    assert error.error.type == "rate_limit_error" and error.error.param is None
    assert ShowError.model_validate({"error": "model 'x' not found"}).error


async def test_the_gateways_health_and_readiness_answers_fit_their_models() -> None:
    async with Gateway(Models(specs=())) as gateway:
        _, _, body = gateway.operations("/healthz")
        assert Health.model_validate_json(body).ok
        _, _, body = gateway.operations("/readyz")
        assert Readiness.model_validate_json(body).models == {}
