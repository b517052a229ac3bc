"""One task tree is one trace, from the caller through the runtime, the gateway, an MCP server
and a delegated child, read back from a real Jaeger: a task whose first answer calls a function
tool, an MCP tool and a delegation, its child's iterations, every model call through the
gateway. One trace id, no orphan span, the GenAI spans where they belong, and token counts
equal to the journal's.

Real processes on loopback: ``ankka standin`` (the model server), ``ankka gateway``, the
catalogue (examples/mcp_catalog.py, the MCP SDK's server) and ``ankka serve`` on
tests/integration/gateway/tree_service.py, every one but the stand-in exporting OTLP to Jaeger.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import model_env
from tests.integration.gateway.conftest import StartGateway, StartStandin, standin_model
from tests.integration.test_mcp import catalog_command
from tests.support.jaeger import Jaeger, Span
from tests.support.processes import ankka_command, started

pytestmark = pytest.mark.integration

SECTIONS = {"title": "ankka", "sections": ["It is known.", "Kettles are sold."]}
SCRIPT = {
    "turns": [
        {"when": "user", "call": 1, "tool_calls": [
            {"name": "lookup", "arguments": {"topic": "ankka"}},
            {"name": "mcp__catalog__search", "arguments": {"query": "kettle"}},
            {"name": "delegate__researcher__summary", "arguments": {"instructions": "Ankka."}}],
         "usage": {"input_tokens": 300, "output_tokens": 50}},
        {"when": "user", "call": 1, "tool_calls": [{"name": "complete_task", "arguments": {
            "title": "ankka", "points": ["It is known."]}}],
         "usage": {"input_tokens": 120, "output_tokens": 20}},
        {"when": "tool", "call": 2, "tool_calls": [
            {"name": "complete_task", "arguments": SECTIONS}],
         "usage": {"input_tokens": 410, "output_tokens": 60, "cache_read_tokens": 300}},
    ],
    "models": {"small": {"capabilities": ["completion", "tools"]}},
}  # fmt: skip
PUT = "PUT /v1/agents/{agent}/tasks/{task}"
UPSTREAM = "POST /v1/chat/completions"


def _by(spans: list[Span], name: str, service: str) -> list[Span]:
    return [s for s in spans if s.name == name and s.service == service]


def _calls(runtime_url: str, session: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{runtime_url}/v1/sessions/{session}/calls", timeout=10)
    answer.raise_for_status()
    calls: list[dict[str, Any]] = answer.json()["calls"]
    return calls


def test_a_task_tree_through_the_gateway_and_an_mcp_server_is_one_trace(
    start_standin: StartStandin,
    start_gateway: StartGateway,
    jaeger_backend: Jaeger,
    tmp_path: Path,
) -> None:
    standin = start_standin(SCRIPT)
    gateway = start_gateway([standin_model(standin.url)], env=jaeger_backend.env("gw"))
    catalog_env = jaeger_backend.env("catalog")
    with started(catalog_command("--port", "0"), env=catalog_env) as catalog:
        env = {
            **model_env(gateway.url),
            "ANKKA_MODEL_DEFAULT_MODEL": "small",
            "ANKKA_MCP_CATALOG_URL": catalog.url,
            **jaeger_backend.env("runtime"),
        }
        store = f"sqlite:///{tmp_path / 'tree.sqlite3'}"
        command = ankka_command(
            "serve", "tests.integration.gateway.tree_service:service", "--port", "0",
            "--store", store,
        )  # fmt: skip
        trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
        with started(command, env=env) as runtime:
            put = httpx.put(
                f"{runtime.url}/v1/agents/lead/tasks/l1",
                json={"type": "report", "instructions": "Report on ankka."},
                headers={"traceparent": f"00-{trace_id}-{caller}-01"},
                timeout=30,
            )
            assert put.status_code == 201, put.text
            task = httpx.get(f"{runtime.url}/v1/tasks/l1", params={"wait": 60}, timeout=90)
            record = task.json()
            assert record["state"] == "completed", record
            (child,) = record["children"]
            calls = _calls(runtime.url, "task:l1") + _calls(runtime.url, f"task:{child}")
            names = {
                PUT, "invoke_agent lead", "invoke_agent researcher", "execute_tool lookup",
                "execute_tool mcp__catalog__search", "execute_tool delegate__researcher__summary",
                "tools/call search", UPSTREAM,
            }  # fmt: skip
            # 3 model calls: each a runtime chat, the gateway's server, check and upstream chat.
            spans = jaeger_backend.trace(trace_id, names=names, at_least=3 * 4 + 9, caller=caller)

    assert {s.trace_id for s in spans} == {trace_id}
    ids = {s.span_id for s in spans}
    orphans = [(s.name, s.service) for s in spans if s.parent_id not in ids]
    assert orphans == [(PUT, "runtime")], "every span's parent is in the trace, but the caller's"
    (put_span,) = _by(spans, PUT, "runtime")
    assert put_span.parent_id == caller

    leads = sorted(_by(spans, "invoke_agent lead", "runtime"), key=lambda s: s.start)
    (research,) = _by(spans, "invoke_agent researcher", "runtime")
    assert {s.parent_id for s in leads} == {put_span.span_id}
    first = leads[0]
    (tool,) = _by(spans, "execute_tool lookup", "runtime")
    (mcp,) = _by(spans, "execute_tool mcp__catalog__search", "runtime")
    (delegation,) = _by(spans, "execute_tool delegate__researcher__summary", "runtime")
    assert {tool.parent_id, mcp.parent_id, delegation.parent_id} == {first.span_id}
    assert tool.tags["gen_ai.tool.type"] == "function"
    assert mcp.tags["gen_ai.tool.type"] == "extension"
    assert mcp.tags["mcp.method.name"] == "tools/call"
    assert delegation.tags["ankka.delegation"] is True
    # The child's iteration is under the delegation call that made it; the MCP server's span
    # under the MCP call.
    assert research.parent_id == delegation.span_id
    assert research.tags["ankka.task.id"] == child
    (served,) = _by(spans, "tools/call search", "catalog")
    assert served.parent_id == mcp.span_id

    # Every model call: the runtime's chat, the gateway's request span its child, the
    # gateway's upstream chat under that.
    chats = _by(spans, "chat small", "runtime")
    gateway_servers = _by(spans, UPSTREAM, "gw")
    upstream = _by(spans, "chat small", "gw")
    assert len(chats) == len(gateway_servers) == len(upstream) == len(calls) == 3
    assert {c.parent_id for c in chats} <= {first.span_id, leads[-1].span_id, research.span_id}
    assert {g.parent_id for g in gateway_servers} == {c.span_id for c in chats}
    # Token counts equal the journal's: per call, at the runtime and at the gateway.
    journal = sorted((c["usage"]["input_tokens"], c["usage"]["output_tokens"]) for c in calls)
    assert journal == [(120, 20), (300, 50), (410, 60)]
    at_runtime = sorted(
        (c.tags["gen_ai.usage.input_tokens"], c.tags["gen_ai.usage.output_tokens"]) for c in chats
    )
    at_gateway = sorted(
        (u.tags["gen_ai.usage.input_tokens"], u.tags["gen_ai.usage.output_tokens"])
        for u in upstream
    )
    assert at_runtime == journal == at_gateway
    tree = record["tree_usage"]
    assert tree["input_tokens"] == sum(i for i, _ in journal)
    assert tree["output_tokens"] == sum(o for _, o in journal)
