"""The gateway's GenAI client metrics (OpenTelemetry's names and buckets) beside its own, and
``process_*``, read from its /metrics after real calls to a stand-in upstream."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.gateway.conftest import StartGateway, StartStandin, standin_model

pytestmark = pytest.mark.integration

CHAT = {"model": "small", "messages": [{"role": "user", "content": "hi"}]}
LABELS = {
    "gen_ai_operation_name": "chat",
    "gen_ai_provider_name": "ollama",
    "gen_ai_request_model": "small",
}


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_each_upstream_call_counts_its_tokens_and_duration_by_the_genai_conventions(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(
        {
            "turns": [
                {"text": "One.", "usage": {"input_tokens": 11, "output_tokens": 3}},
                {"text": "Two.", "usage": {"input_tokens": 20, "output_tokens": 5}},
                {"status": 500, "text": "boom"},
            ],
            "models": {"small": {"capabilities": ["completion"]}},
        }
    )
    gateway = start_gateway([standin_model(standin.url)])
    assert httpx.post(f"{gateway.url}/v1/chat/completions", json=CHAT).status_code == 200
    streamed = httpx.post(f"{gateway.url}/v1/chat/completions", json={**CHAT, "stream": True})
    assert streamed.status_code == 200
    assert httpx.post(f"{gateway.url}/v1/chat/completions", json=CHAT).status_code == 500
    # A refusal is no upstream call: not counted here.
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    refused = httpx.post(f"{gateway.url}/v1/chat/completions", json={**CHAT, "tools": tools})
    assert refused.status_code == 400

    samples = _samples(gateway.metrics())

    def value(name: str, **labels: str) -> float:
        return samples[(name, frozenset({**LABELS, **labels}.items()))]

    tokens = "gen_ai_client_token_usage"
    assert value(f"{tokens}_count", gen_ai_token_type="input") == 2
    assert value(f"{tokens}_sum", gen_ai_token_type="input") == 31
    assert value(f"{tokens}_sum", gen_ai_token_type="output") == 8
    # The conventions' boundaries: 16 holds 11, not 20; 64 holds both.
    assert value(f"{tokens}_bucket", gen_ai_token_type="input", le="16.0") == 1
    assert value(f"{tokens}_bucket", gen_ai_token_type="input", le="64.0") == 2
    duration = "gen_ai_client_operation_duration_seconds"
    assert value(f"{duration}_count", error_type="") == 2
    assert value(f"{duration}_count", error_type="500") == 1
    assert (
        f"{duration}_bucket",
        frozenset({**LABELS, "error_type": "", "le": "81.92"}.items()),
    ) in (samples)
    # Beside the gateway's own names, which count the same calls.
    assert (
        samples[
            (
                "ankka_gateway_prompt_tokens_total",
                frozenset({"model": "small", "caller": "anonymous"}.items()),
            )
        ]
        == 31
    )
    assert samples[("process_resident_memory_bytes", frozenset())] > 0
