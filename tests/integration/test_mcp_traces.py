"""MCP tool calls in the caller's trace: each call is the engine's ``execute_tool`` span with
the MCP conventions' attributes (no second span of the MCP SDK's), and its W3C context goes to
the server in the request's ``params._meta``, so the server's own span is its child.

Real processes on loopback: the catalogue (examples/mcp_catalog.py, the official SDK's server,
recording every ``_meta`` it receives and itself traced), the stand-in as the model, and the
shop agent (examples/shop.py) under ``ankka serve``, both exporting to Jaeger
(tests/support/jaeger.py), whose query API the spans are read back from.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import Script, model_env
from tests.integration.test_mcp import catalog_command, search
from tests.integration.test_task_traces import servers
from tests.support.jaeger import Jaeger, Span
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration
__all__ = ["servers"]  # the task traces' fixture, used here

TURN = "POST /v1/agents/{agent}/sessions/{session}"
TOOL = "execute_tool mcp__catalog__search"


def _shop(
    servers: list[Server],
    standin: Server,
    catalog: Server,
    tmp_path: Path,
    env: dict[str, str],
) -> Server:
    store = f"sqlite:///{tmp_path / 'shop.sqlite3'}"
    command = ankka_command("serve", "examples.shop:service", "--port", "0", "--store", store)
    mcp = {"ANKKA_MCP_CATALOG_URL": catalog.url, "ANKKA_MCP_CATALOG_PING_INTERVAL": "0.5"}
    server = start(command, env={**model_env(standin.url), **mcp, **env})
    servers.append(server)
    return server


def _catalog(servers: list[Server], metas: Path, *args: str, env: dict[str, str]) -> Server:
    command = catalog_command("--port", "0", "--record-meta", str(metas), *args)
    server = start(command, env=env)
    servers.append(server)
    return server


def _ask(shop: Server, traceparent: str | None = None) -> dict[str, Any]:
    headers = {"traceparent": traceparent} if traceparent else {}
    answer = httpx.post(
        f"{shop.url}/v1/agents/shop/sessions/s",
        json={"message": "Kettles?"},
        headers=headers,
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _metas(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _samples(server: Server, name: str) -> list[tuple[dict[str, str], float]]:
    """The samples named ``name`` in ``server``'s /metrics: labels and value."""

    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return [
        (dict(s.labels), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    ]


def _one(spans: list[Span], name: str, service: str) -> Span:
    found = [s for s in spans if s.name == name and s.service == service]
    assert len(found) == 1, [(s.name, s.service) for s in spans]
    return found[0]


def test_an_mcp_call_is_an_execute_tool_span_whose_context_the_server_continues(
    standin: Callable[[Script], Server],
    servers: list[Server],
    jaeger_backend: Jaeger,
    tmp_path: Path,
) -> None:
    metas = tmp_path / "metas.jsonl"
    catalog = _catalog(servers, metas, env=jaeger_backend.env("catalog"))
    model = standin(search("kettle"))
    shop = _shop(servers, model, catalog, tmp_path, jaeger_backend.env("shop"))
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    assert "Done." in _ask(shop, f"00-{trace_id}-{caller}-01")["reply"]

    names = {TURN, "invoke_agent shop", TOOL, "chat standin", "tools/call search"}
    spans = jaeger_backend.trace(trace_id, names=names, at_least=6, caller=caller)
    assert {s.trace_id for s in spans} == {trace_id}
    ids = {s.span_id for s in spans}
    assert [s.name for s in spans if s.parent_id not in ids and s.parent_id != caller] == []
    # The runtime made only its own spans: none of the MCP SDK's (no "MCP send ...").
    assert sorted(s.name for s in spans if s.service == "shop") == sorted(
        [TURN, "invoke_agent shop", "chat standin", "chat standin", TOOL]
    )
    agent = _one(spans, "invoke_agent shop", "shop")
    tool = _one(spans, TOOL, "shop")
    assert tool.parent_id == agent.span_id and tool.kind == "internal"
    assert tool.tags["gen_ai.operation.name"] == "execute_tool"
    assert tool.tags["gen_ai.tool.name"] == "mcp__catalog__search"
    assert tool.tags["gen_ai.tool.type"] == "extension"
    assert tool.tags["mcp.method.name"] == "tools/call"
    assert tool.tags["mcp.protocol.version"] >= "2025-06-18"
    assert tool.tags["network.transport"] == "tcp"
    assert tool.tags["network.protocol.name"] == "http"
    assert tool.tags["server.address"] == "127.0.0.1"
    assert str(tool.tags["server.port"]) == catalog.url.rsplit(":", 1)[1].split("/")[0]
    assert tool.tags["ankka.mcp.server"] == "catalog"
    assert tool.tags["ankka.mcp.tool"] == "search"
    assert "error.type" not in tool.tags
    # The server received the execute_tool span's context in _meta and continued it.
    (received,) = _metas(metas)
    assert received["tool"] == "search"
    assert received["meta"]["traceparent"] == f"00-{trace_id}-{tool.span_id}-01"
    served = _one(spans, "tools/call search", "catalog")
    assert served.parent_id == tool.span_id and served.kind == "server"
    # The JSON-RPC id the server received for that call is the span's (the SDK's own, the
    # first request after initialize is never it: the runtime listed the tools first).
    assert received["id"] is not None
    assert tool.tags["jsonrpc.request.id"] == str(received["id"])
    assert served.tags["jsonrpc.request.id"] == str(received["id"])
    # mcp.client.operation.duration: the call, under the conventions' attributes.
    (sample,) = _samples(shop, "mcp_client_operation_duration_seconds_count")
    port = str(tool.tags["server.port"])
    assert sample == (
        {
            "mcp_method_name": "tools/call",
            "gen_ai_operation_name": "execute_tool",
            "gen_ai_tool_name": "mcp__catalog__search",
            "error_type": "",
            "rpc_response_status_code": "",
            "mcp_protocol_version": tool.tags["mcp.protocol.version"],
            "network_transport": "tcp",
            "network_protocol_name": "http",
            "server_address": "127.0.0.1",
            "server_port": port,
        },
        1.0,
    )


def test_a_failed_mcp_call_names_its_error_and_a_session_its_id(
    standin: Callable[[Script], Server],
    servers: list[Server],
    jaeger_backend: Jaeger,
    tmp_path: Path,
) -> None:
    metas = tmp_path / "metas.jsonl"
    # A handshake-era server holds a session (mcp-session-id); every search outlasts the
    # call's deadline (its timeout), so the call fails without an answer.
    catalog = _catalog(servers, metas, "--handshake-only", "--delay", "8", env={})
    model = standin(search("kettle"))
    env = {**jaeger_backend.env("shop"), "ANKKA_MCP_CATALOG_TIMEOUT": "1"}
    shop = _shop(servers, model, catalog, tmp_path, env)
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    _ask(shop, f"00-{trace_id}-{caller}-01")

    spans = jaeger_backend.trace(trace_id, names={TOOL, "invoke_agent shop"})
    tool = _one(spans, TOOL, "shop")
    assert tool.tags["error.type"] == "timeout"
    assert tool.tags["otel.status_code"] == "ERROR"
    assert tool.tags["mcp.protocol.version"] == "2025-11-25"
    assert len(tool.tags["mcp.session.id"]) >= 8
    assert "rpc.response.status_code" not in tool.tags
    (received,) = _metas(metas)
    assert received["meta"]["traceparent"] == f"00-{trace_id}-{tool.span_id}-01"
    assert tool.tags["jsonrpc.request.id"] == str(received["id"])
    (sample,) = _samples(shop, "mcp_client_operation_duration_seconds_count")
    assert sample[0]["error_type"] == "timeout" and sample[1] == 1.0


def test_with_tracing_off_no_context_is_sent_to_the_server(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    metas = tmp_path / "metas.jsonl"
    catalog = _catalog(servers, metas, env={})
    model = standin(search("kettle"))
    shop = _shop(servers, model, catalog, tmp_path, {})
    caller = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"
    _ask(shop, caller)
    (received,) = _metas(metas)
    assert "traceparent" not in received["meta"], received
