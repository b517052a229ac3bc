"""Every route the docs name exists: in the runtime's or the gateway's OpenAPI document.

The docs (``docs/*.md`` and the README) name routes in backticks, as ``/v1/tasks/{task}`` or
``GET /v1/approvals``; one of them once named ``/v1/tasks/{id}/events``, which answered 404.
Each such route of ankka's API (under ``/v1/``, ``/api/``, and ``/healthz``, ``/readyz``,
``/metrics``) must match a path of the document a real server answers at ``/openapi.json``
(a ``{name}`` matches any segment, and a concrete segment matches a template's), with the
method when one is named (a route of another server, such as Jaeger's, is listed with whose
it is). The servers are asked over HTTP, so the test holds whatever builds
the documents. The console's pages are HTML, not API: each is asked of a runtime with the
console on and must answer as the console (HTML or its script), not the API's JSON 404.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.processes import REPO, Server, ankka_command, start

pytestmark = pytest.mark.integration

_NAMED = re.compile(r"`(?:(GET|POST|PUT|DELETE|PATCH) )?(/[^`\s]*)`")
_API = re.compile(r"^/(?:v1/.+|api/.+|healthz|readyz|metrics)$")
_SERVED_BESIDE = {"/openapi.json"}  # the document itself, on both servers
# Routes of other servers the docs name, each with whose it is.
_ELSEWHERE = {
    "/api/traces/{id}": "Jaeger's query API, where the tracing tests read spans",
}


def _documented() -> list[tuple[str, str | None, str]]:
    """(file, method or None, path) for every route named in the docs."""
    found = []
    for doc in sorted([*(REPO / "docs").glob("*.md"), REPO / "README.md"]):
        for method, raw in _NAMED.findall(doc.read_text()):
            path = raw.split("?", 1)[0].rstrip(".,;:")
            if path.startswith(("/v1", "/api", "/healthz", "/readyz", "/metrics", "/console")):
                found.append((doc.name, method or None, path))
    return found


def _matches(path: str, template: str) -> bool:
    named, offered = path.strip("/").split("/"), template.strip("/").split("/")
    if len(named) != len(offered):
        return False
    for a, b in zip(named, offered, strict=True):
        if a.startswith("{") or b.startswith("{"):
            continue
        if a != b:
            return False
    return True


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """``/openapi.json`` of a real runtime and a real gateway."""
    tmp = tmp_path_factory.mktemp("docs-routes")
    models = tmp / "models.yaml"
    models.write_text("[]\n")
    servers: list[Server] = []
    try:
        runtime = start(
            ankka_command(
                "serve", "examples.newsroom:service", "--port", "0",
                "--store", f"sqlite:///{tmp / 'store.sqlite3'}",
            ),
            deadline=60,
        )  # fmt: skip
        servers.append(runtime)
        gateway = start(
            ankka_command("gateway", "--insecure", "--models", str(models), "--port", "0"),
            deadline=60,
        )
        servers.append(gateway)
        return {
            name: httpx.get(f"{server.url}/openapi.json", timeout=30).json()
            for name, server in (("runtime", runtime), ("gateway", gateway))
        }
    finally:
        for server in servers:
            server.stop()


def test_the_docs_name_routes_and_the_scan_finds_them() -> None:
    paths = {path for _, _, path in _documented()}
    # Known routes in the docs (else the scan would pass by finding nothing).
    assert {"/v1/tasks/{task}/notifications", "/v1/approvals", "/console", "/readyz"} <= paths


def test_every_api_route_the_docs_name_is_in_an_openapi_document(
    documents: dict[str, dict[str, Any]],
) -> None:
    offered = [
        (template, {m.upper() for m in item})
        for document in documents.values()
        for template, item in document["paths"].items()
    ]
    missing = []
    for doc, method, path in _documented():
        if path in _SERVED_BESIDE or path in _ELSEWHERE or not _API.match(path):
            continue
        fitting = [methods for template, methods in offered if _matches(path, template)]
        if not fitting or (method is not None and not any(method in m for m in fitting)):
            missing.append(f"{doc}: {method or ''} {path}".replace("  ", " "))
    assert missing == [], "routes the docs name that no OpenAPI document has"


def test_every_console_page_the_docs_name_is_served_by_the_console(
    standin: Callable[[Any], Server], serve: Callable[..., Server]
) -> None:
    runtime = serve(standin([]).url, target="examples.tasks:service", env={"ANKKA_CONSOLE": "on"})
    wrong = []
    for doc, method, path in _documented():
        if not path.startswith("/console"):
            continue
        concrete = re.sub(r"\{[^}]+\}", "x", path)
        answer = httpx.request(method or "GET", f"{runtime.url}{concrete}", timeout=30)
        kind = answer.headers.get("content-type", "")
        if not kind.startswith(("text/html", "text/javascript")):  # the API's 404 is JSON
            wrong.append(f"{doc}: {method or 'GET'} {path} answered {answer.status_code} {kind}")
    assert wrong == []
