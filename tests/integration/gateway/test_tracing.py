"""Traces read back from a real Jaeger: the caller's trace continued through the gateway (and
the runtime) to the model server, with the GenAI conventions' spans and attributes.

Real processes on loopback: ``ankka standin`` (the model server; it records the ``traceparent``
each request arrived with), ``ankka gateway`` and ``ankka serve`` exporting OTLP to Jaeger,
whose query API (``/api/traces/{id}``) is read back (tests/support/jaeger.py).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import model_env
from tests.integration.gateway.conftest import (
    Gateway,
    Standin,
    StartGateway,
    StartStandin,
    standin_model,
)
from tests.support.jaeger import Jaeger, Span
from tests.support.processes import ankka_command, started

pytestmark = pytest.mark.integration

SCRIPT = {
    "turns": [
        {"text": "Traced hello.", "usage": {"input_tokens": 11, "output_tokens": 3}},
        {"text": "Again.", "usage": {"input_tokens": 12, "output_tokens": 2}},
    ],
    "models": {"small": {"capabilities": ["completion"]}},
}
HELLO = {"model": "small", "messages": [{"role": "user", "content": "hi"}]}


def _traceparent() -> tuple[str, str, str]:
    """A caller's (traceparent, trace id, span id), sampled."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def _chat(gateway: Gateway, body: Mapping[str, object], traceparent: str) -> httpx.Response:
    """A chat request to the gateway from a caller whose span is ``traceparent``."""
    return httpx.post(
        f"{gateway.url}/v1/chat/completions",
        json=body,
        headers={"traceparent": traceparent},
        timeout=30,
    )


def _one(spans: list[Span], name: str) -> Span:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, f"{name}: {[s.name for s in spans]}"
    return found[0]


@pytest.fixture
def traced_gateway(
    start_standin: StartStandin, start_gateway: StartGateway, jaeger_backend: Jaeger
) -> tuple[Gateway, Standin]:
    standin = start_standin(SCRIPT)
    gateway = start_gateway(
        [standin_model(standin.url)], env=jaeger_backend.env("gateway-under-test")
    )
    return gateway, standin


def test_the_gateway_continues_the_callers_trace_to_the_model_server(
    traced_gateway: tuple[Gateway, Standin], jaeger_backend: Jaeger
) -> None:
    gateway, standin = traced_gateway
    traceparent, trace_id, caller_span = _traceparent()
    answer = _chat(gateway, HELLO, traceparent)
    assert answer.status_code == 200, answer.text

    spans = jaeger_backend.trace(
        trace_id, names={"POST /v1/chat/completions", "ankka.gateway.check", "chat small"}
    )
    server = _one(spans, "POST /v1/chat/completions")
    check = _one(spans, "ankka.gateway.check")
    chat = _one(spans, "chat small")
    assert {span.trace_id for span in spans} == {trace_id}
    assert server.parent_id == caller_span, "the server span continues the caller's span"
    assert check.parent_id == server.span_id
    assert chat.parent_id == server.span_id
    assert (server.kind, chat.kind) == ("server", "client")
    assert server.service == "gateway-under-test"
    assert server.tags["http.response.status_code"] == 200
    assert server.tags["http.route"] == "/v1/chat/completions"
    assert check.tags["ankka.gateway.forwarded"] is True
    assert chat.tags["gen_ai.operation.name"] == "chat"
    assert chat.tags["gen_ai.provider.name"] == "ollama"
    assert chat.tags["gen_ai.request.model"] == "small"
    assert chat.tags["gen_ai.usage.input_tokens"] == 11
    assert chat.tags["gen_ai.usage.output_tokens"] == 3
    assert chat.tags["server.address"] == "127.0.0.1"
    assert "error.type" not in chat.tags

    # The request the model server received carried the trace on: same trace, the upstream
    # span as its parent.
    (received,) = standin.chats()
    assert received["headers"]["traceparent"] == f"00-{trace_id}-{chat.span_id}-01"


def test_a_refusal_is_its_own_span_and_nothing_reaches_the_model(
    traced_gateway: tuple[Gateway, Standin], jaeger_backend: Jaeger
) -> None:
    gateway, standin = traced_gateway
    traceparent, trace_id, _ = _traceparent()
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    answer = _chat(gateway, {**HELLO, "tools": tools}, traceparent)
    assert answer.status_code == 400

    spans = jaeger_backend.trace(
        trace_id,
        names={"POST /v1/chat/completions", "ankka.gateway.check", "ankka.gateway.refusal"},
    )
    check = _one(spans, "ankka.gateway.check")
    refusal = _one(spans, "ankka.gateway.refusal")
    assert refusal.parent_id == check.span_id
    assert check.tags["ankka.gateway.forwarded"] is False
    assert refusal.tags["ankka.gateway.refusal.reason"] == "model_lacks_capability"
    assert refusal.tags["ankka.gateway.refusal.code"] == "model_lacks_capability"
    assert refusal.tags["http.response.status_code"] == 400
    assert "tools" in refusal.tags["ankka.gateway.refusal.message"]
    assert not [s for s in spans if s.name.startswith("chat ")]
    assert standin.chats() == []


def test_a_failed_upstream_call_is_an_error_span(
    start_standin: StartStandin, start_gateway: StartGateway, jaeger_backend: Jaeger
) -> None:
    standin = start_standin(
        {"turns": [{"status": 500, "text": "boom"}], "models": SCRIPT["models"]}
    )
    gateway = start_gateway([standin_model(standin.url)], env=jaeger_backend.env("gw-failing"))
    traceparent, trace_id, _ = _traceparent()
    answer = _chat(gateway, HELLO, traceparent)
    assert answer.status_code == 500

    spans = jaeger_backend.trace(trace_id, names={"chat small"})
    chat = _one(spans, "chat small")
    assert chat.tags["error.type"] == "500"
    assert chat.tags["otel.status_code"] == "ERROR"
    assert chat.tags["http.response.status_code"] == 500


def test_without_otel_settings_nothing_is_traced_or_sent_on(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(SCRIPT)
    gateway = start_gateway([standin_model(standin.url)])
    traceparent, _, _ = _traceparent()
    answer = _chat(gateway, HELLO, traceparent)
    assert answer.status_code == 200
    (received,) = standin.chats()
    assert "traceparent" not in received["headers"]


def test_one_trace_from_the_caller_through_the_runtime_and_the_gateway(
    start_standin: StartStandin,
    start_gateway: StartGateway,
    jaeger_backend: Jaeger,
    tmp_path: Path,
) -> None:
    standin = start_standin(SCRIPT)
    gateway = start_gateway([standin_model(standin.url)], env=jaeger_backend.env("gw"))
    env = {
        **model_env(gateway.url),
        "ANKKA_MODEL_DEFAULT_MODEL": "small",
        **jaeger_backend.env("runtime-under-test"),
    }
    command = ankka_command("serve", "tests.integration.services:service", "--port", "0")
    traceparent, trace_id, caller_span = _traceparent()
    store = f"sqlite:///{tmp_path / 'sessions.sqlite3'}"
    with started([*command, "--store", store], env=env) as runtime:
        answer = httpx.post(
            f"{runtime.url}/v1/agents/polite/sessions/traced",
            json={"message": "hi"},
            headers={"traceparent": traceparent},
            timeout=30,
        )
    assert answer.status_code == 200, answer.text

    turn = "POST /v1/agents/{agent}/sessions/{session}"
    names = {turn, "invoke_agent polite", "POST /v1/chat/completions", "chat small"}
    spans = jaeger_backend.trace(trace_id, names=names, at_least=6)
    runtime_span = _one(spans, turn)
    gateway_span = _one(spans, "POST /v1/chat/completions")
    (runtime_chat,) = [s for s in spans if s.name == "chat small" and s.service != "gw"]
    assert runtime_span.parent_id == caller_span
    assert runtime_span.service == "runtime-under-test"
    assert runtime_span.tags["ankka.caller"] == "local"
    assert gateway_span.service == "gw"
    # The gateway's server span is a child of the runtime's chat span (the engine's, under
    # its invoke_agent): the provider's HTTP client sent that span's context.
    assert _one(spans, "invoke_agent polite").parent_id == runtime_span.span_id
    assert gateway_span.parent_id == runtime_chat.span_id
    (received,) = standin.chats()
    assert received["headers"]["traceparent"].split("-")[1] == trace_id


def test_a_log_line_inside_a_span_names_its_trace_and_span(
    start_gateway: StartGateway, jaeger_backend: Jaeger
) -> None:
    # Nothing listens at port 9: the connect fails inside the upstream span, which is logged.
    declared = {"name": "small", "kind": "openai", "url": "http://127.0.0.1:9"}
    gateway = start_gateway(
        [{**declared, "capabilities": ["completion"]}],
        env={**jaeger_backend.env("gw-logs"), "ANKKA_LOG_FORMAT": "json"},
    )
    traceparent, trace_id, _ = _traceparent()
    answer = _chat(gateway, HELLO, traceparent)
    assert answer.status_code == 503
    chat = _one(jaeger_backend.trace(trace_id, names={"chat small"}), "chat small")
    assert chat.tags["error.type"] == "unavailable"
    lines = [json.loads(line) for line in gateway.output if line.startswith("{")]
    (logged,) = [e for e in lines if "127.0.0.1:9" in e["message"]]
    assert logged["level"] == "WARNING"
    assert (logged["trace_id"], logged["span_id"]) == (trace_id, chat.span_id)
    untraced = [e for e in lines if "listening on" in e["message"]]
    assert untraced and "trace_id" not in untraced[0]
