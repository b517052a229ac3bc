"""Prometheus metrics of a runtime's MCP servers: calls per server and tool, failures, latency,
whether each server is connected. Labels carry server and tool names only (a listing is
bounded, :data:`~.listing.MAX_TOOLS`), never arguments, results or header values."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ankka._kernel.exposition import LATENCY_BUCKETS

__all__ = ["McpMetrics", "Outcome"]

Outcome = str  # ok | error (the server's isError) | failed (no answer) | invalid | refused


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

    def call(self, server: str, tool: str, outcome: Outcome, seconds: float | None) -> None:
        self.calls.labels(server, tool, outcome).inc()
        if seconds is not None:
            self.seconds.labels(server, tool).observe(seconds)
