"""The runtime's, its MCP servers' and the gateway's latency histograms count on one bucket
ladder, and both deployables answer /metrics with one content type."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, generate_latest

from ankka._kernel.exposition import CONTENT_TYPE, LATENCY_BUCKETS
from ankka.gateway.metrics import GatewayMetrics
from ankka.runtime.engine.metrics import RuntimeMetrics
from ankka.runtime.features.mcp.metrics import McpMetrics


def _ladder(text: str, metric: str) -> list[float]:
    found = re.findall(rf'^{metric}_bucket\{{.*?le="([^"]+)"', text, flags=re.MULTILINE)
    assert found, f"no {metric} buckets in the exposition"
    return [float(le) for le in found if le != "+Inf"]


def test_every_latency_histogram_has_the_shared_ladder() -> None:
    runtime = RuntimeMetrics()
    runtime.model_seconds.labels("p", "m").observe(0.3)
    runtime.turn_seconds.labels("a").observe(0.3)
    mcp_registry = CollectorRegistry()
    mcp = McpMetrics(mcp_registry)
    mcp.call("catalog", "search", "ok", 0.3)
    gateway = GatewayMetrics()
    gateway.of("m", "c").latency.observe(0.3)

    runtime_text = runtime.render().decode()
    expected = [float(b) for b in LATENCY_BUCKETS]
    assert _ladder(runtime_text, "ankka_model_call_seconds") == expected
    assert _ladder(runtime_text, "ankka_turn_seconds") == expected
    assert _ladder(generate_latest(mcp_registry).decode(), "ankka_mcp_call_seconds") == expected
    assert _ladder(gateway.render().decode(), "ankka_gateway_request_seconds") == expected
    assert 'ankka_gateway_request_seconds_bucket{caller="c",le="0.25",model="m"} 0.0' in (
        gateway.render().decode()
    )


def test_the_content_type_is_prometheus_text_format() -> None:
    assert CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"
    assert tuple(sorted(LATENCY_BUCKETS)) == LATENCY_BUCKETS
