"""The runtime's engine spans read back from a real Jaeger: a caller's request turn that calls
a function tool, through the gateway to the model server, is one trace: the runtime's SERVER
span, its ``invoke_agent``, a ``chat`` per model call (the gateway's spans its children) and
an ``execute_tool`` per tool run, with the GenAI conventions' attributes and the journal's
token counts.

Real processes on loopback: ``ankka standin`` (the model server), ``ankka gateway`` and
``ankka serve`` exporting OTLP to Jaeger (tests/support/jaeger.py).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import model_env
from tests.integration.gateway.conftest import StartGateway, StartStandin, standin_model
from tests.support.jaeger import Jaeger, Span
from tests.support.processes import ankka_command, started

pytestmark = pytest.mark.integration

SCRIPT = {
    "turns": [
        {
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
            "usage": {"input_tokens": 21, "output_tokens": 7},
        },
        {
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Atlantis"}}],
            "usage": {"input_tokens": 30, "output_tokens": 6},
        },
        {
            "text": "Oslo is cold; Atlantis is unknown.",
            "usage": {"input_tokens": 40, "output_tokens": 9},
        },
    ],
    "models": {"small": {"capabilities": ["completion", "tools"]}},
}
TURN = "POST /v1/agents/{agent}/sessions/{session}"


def _by(spans: list[Span], name: str, service: str) -> list[Span]:
    return [s for s in spans if s.name == name and s.service == service]


def _traced_turn(
    start_standin: StartStandin,
    start_gateway: StartGateway,
    jaeger: Jaeger,
    tmp_path: Path,
    env: dict[str, str] | None = None,
) -> tuple[str, str, list[Span], dict[str, Any]]:
    """One weather turn from a traced caller; (trace id, caller span, the trace's spans, the
    journal's calls of the session)."""
    standin = start_standin(SCRIPT)
    gateway = start_gateway([standin_model(standin.url)], env=jaeger.env("gw"))
    runtime_env = {
        **model_env(gateway.url),
        "ANKKA_MODEL_DEFAULT_MODEL": "small",
        **jaeger.env("runtime"),
        **(env or {}),
    }
    command = ankka_command("serve", "tests.integration.services:service", "--port", "0")
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    store = f"sqlite:///{tmp_path / 'sessions.sqlite3'}"
    with started([*command, "--store", store], env=runtime_env) as runtime:
        answer = httpx.post(
            f"{runtime.url}/v1/agents/weather/sessions/traced",
            json={"message": "Weather in Oslo and Atlantis?"},
            headers={"traceparent": f"00-{trace_id}-{caller}-01"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        calls = httpx.get(f"{runtime.url}/v1/sessions/traced/calls", timeout=10).json()
    names = {TURN, "invoke_agent weather", "execute_tool get_weather", "chat small"}
    # Every span: the runtime's server, invoke_agent, 3 chats and 2 tools; the gateway's
    # server, check and upstream chat for each of the 3 calls.
    spans = jaeger.trace(trace_id, names=names, at_least=7 + 3 * 3, caller=caller)
    return trace_id, caller, spans, calls


def test_a_request_turn_is_one_trace_of_genai_spans_from_the_caller_to_the_model(
    start_standin: StartStandin,
    start_gateway: StartGateway,
    jaeger_backend: Jaeger,
    tmp_path: Path,
) -> None:
    trace_id, caller, spans, calls = _traced_turn(
        start_standin, start_gateway, jaeger_backend, tmp_path
    )
    assert {s.trace_id for s in spans} == {trace_id}
    ids = {s.span_id for s in spans}
    orphans = [s.name for s in spans if s.parent_id not in ids and s.parent_id != caller]
    assert orphans == [], "every span's parent is in the trace (or is the caller's)"

    (server,) = _by(spans, TURN, "runtime")
    (agent,) = _by(spans, "invoke_agent weather", "runtime")
    chats = sorted(_by(spans, "chat small", "runtime"), key=lambda s: s.start)
    tools = _by(spans, "execute_tool get_weather", "runtime")
    gateway_servers = _by(spans, "POST /v1/chat/completions", "gw")
    assert server.parent_id == caller
    assert agent.parent_id == server.span_id
    assert len(chats) == 3 and len(tools) == 2 and len(gateway_servers) == 3
    assert {c.parent_id for c in chats} == {agent.span_id}
    assert {t.parent_id for t in tools} == {agent.span_id}
    # The gateway's request span is a child of the runtime's chat span that sent it.
    assert {g.parent_id for g in gateway_servers} == {c.span_id for c in chats}

    assert agent.tags["gen_ai.operation.name"] == "invoke_agent"
    assert agent.tags["gen_ai.agent.name"] == "weather"
    assert agent.tags["gen_ai.conversation.id"] == "traced"
    assert agent.tags["gen_ai.provider.name"] == "openai"
    assert agent.tags["ankka.turn.outcome"] == "finished"
    assert agent.tags["ankka.model_calls"] == 3

    # Token counts equal the journal's, call by call and in sum.
    journal = [c["usage"] for c in calls["calls"]]
    assert len(journal) == 3
    for chat, written in zip(chats, journal, strict=True):
        assert chat.kind == "client"
        assert chat.tags["gen_ai.operation.name"] == "chat"
        assert chat.tags["gen_ai.provider.name"] == "openai"
        assert chat.tags["gen_ai.request.model"] == "small"
        assert chat.tags["gen_ai.response.model"] == "small"
        assert chat.tags["gen_ai.usage.input_tokens"] == written["input_tokens"]
        assert chat.tags["gen_ai.usage.output_tokens"] == written["output_tokens"]
    assert [c.tags["gen_ai.usage.input_tokens"] for c in chats] == [21, 30, 40]
    assert agent.tags["gen_ai.usage.input_tokens"] == 91
    assert agent.tags["gen_ai.usage.output_tokens"] == 22
    finish = [c.tags["gen_ai.response.finish_reasons"] for c in chats]
    assert finish[-1] == '["stop"]' and finish[0] == '["tool_calls"]', finish

    ok, failed = sorted(tools, key=lambda t: "error.type" in t.tags)
    assert ok.tags["gen_ai.tool.type"] == "function"
    assert ok.tags["gen_ai.tool.name"] == "get_weather"
    assert ok.tags["gen_ai.tool.call.id"]
    assert failed.tags["error.type"] == "tool_error"
    # No content unless asked: neither what was said nor what the tool answered.
    for span in spans:
        assert not [k for k in span.tags if "messages" in k or "call.result" in k], span.name
        assert "Atlantis" not in repr(span.tags)


def test_message_content_is_on_the_spans_only_when_opted_in(
    start_standin: StartStandin,
    start_gateway: StartGateway,
    jaeger_backend: Jaeger,
    tmp_path: Path,
) -> None:
    opt_in = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    _, _, spans, _ = _traced_turn(start_standin, start_gateway, jaeger_backend, tmp_path, opt_in)
    chats = sorted(_by(spans, "chat small", "runtime"), key=lambda s: s.start)
    assert "Weather in Oslo and Atlantis?" in chats[0].tags["gen_ai.input.messages"]
    assert "Oslo is cold" in chats[-1].tags["gen_ai.output.messages"]
    tools = _by(spans, "execute_tool get_weather", "runtime")
    results = {
        t.tags["gen_ai.tool.call.result"] for t in tools if "gen_ai.tool.call.result" in t.tags
    }
    assert any(r.startswith("Oslo:") for r in results), results
