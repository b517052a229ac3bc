"""Prometheus metrics of a runtime's MCP servers: calls per server and tool, failures, latency,
whether each server is connected; and OpenTelemetry's ``mcp.client.operation.duration`` of
each ``tools/call`` (mcp.md, v1.41.0), named, labelled and bucketed as the conventions say.
Labels carry server and tool names, the configured server's address and the protocol only (a
listing is bounded, :data:`~.listing.MAX_TOOLS`), never arguments, results or header values."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ankka._kernel import genai
from ankka._kernel.exposition import LATENCY_BUCKETS

__all__ = ["OPERATION_BUCKETS", "OPERATION_DURATION", "McpMetrics", "Outcome"]

Outcome = str  # ok | error (the server's isError) | failed (no answer) | invalid | refused

OPERATION_DURATION = "mcp.client.operation.duration"
"""Histogram (unit ``s``) of an MCP request's time, from its sending to its answer."""
OPERATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
"""The boundaries mcp.md says the histogram SHOULD have."""
_OPERATION_KEYS = (
    genai.MCP_METHOD_NAME,
    genai.OPERATION_NAME,
    genai.TOOL_NAME,
    genai.ERROR_TYPE,
    genai.RPC_RESPONSE_STATUS_CODE,
    genai.MCP_PROTOCOL_VERSION,
    genai.NETWORK_TRANSPORT,
    genai.NETWORK_PROTOCOL_NAME,
    genai.SERVER_ADDRESS,
    genai.SERVER_PORT,
)


class McpMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = Counter(
            "ankka_mcp_calls",
            "MCP tool calls, by server, tool and outcome (ok, error, failed, invalid, refused)",
            ["server", "tool", "outcome"],
            registry=registry,
        )
        self.seconds = Histogram(
            "ankka_mcp_call_seconds",
            "Latency of MCP tool calls that reached the server",
            ["server", "tool"],
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )
        self.connected = Gauge(
            "ankka_mcp_connected",
            "1 while the MCP server has a session",
            ["server"],
            registry=registry,
        )
        self.sessions = Counter(
            "ankka_mcp_sessions",
            "MCP sessions started (the first, then one per re-initialisation)",
            ["server"],
            registry=registry,
        )
        self.tools_left_out = Counter(
            "ankka_mcp_tools_left_out",
            "Listed tools not offered to a model (a description guardrail or a bad schema)",
            ["server"],
            registry=registry,
        )

        self.operation_seconds = Histogram(
            genai.prometheus_label(OPERATION_DURATION),
            "Duration of MCP requests as the client saw them (OpenTelemetry MCP)",
            [genai.prometheus_label(key) for key in _OPERATION_KEYS],
            unit="seconds",
            buckets=OPERATION_BUCKETS,
            registry=registry,
        )

    def operation(self, attributes: Mapping[str, str | int], seconds: float) -> None:
        """One request's ``seconds`` under its attributes (a key not given: empty label)."""
        labels = [str(attributes.get(key, "")) for key in _OPERATION_KEYS]
        self.operation_seconds.labels(*labels).observe(seconds)

    def call(self, server: str, tool: str, outcome: Outcome, seconds: float | None) -> None:
        self.calls.labels(server, tool, outcome).inc()
        if seconds is not None:
            self.seconds.labels(server, tool).observe(seconds)
