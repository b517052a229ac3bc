"""What the MCP SDK's quieted spans fold into the runtime's: only a ``tools/call`` sent inside an
MCP tool's ``execute_tool`` span gives it its ``jsonrpc.request.id`` (the SDK's re-list inside
the call, and a call outside any MCP tool's span, leave the span alone). The real SDK's id, read
back from a real server: tests/integration/test_mcp_traces.py."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ankka.runtime.features.mcp import fold_sdk_span


def _call(method: str, request: object) -> dict[str, object]:
    return {"mcp.method.name": method, "jsonrpc.request.id": request}


def test_only_a_tools_call_inside_an_mcp_tools_span_gets_the_request_id() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    mcp = {"ankka.mcp.server": "catalog", "ankka.mcp.tool": "search"}
    with tracer.start_as_current_span("execute_tool mcp__catalog__search", attributes=mcp) as span:
        fold_sdk_span(span, "MCP send tools/call search", _call("tools/call", 7))
        fold_sdk_span(span, "MCP send tools/list", _call("tools/list", 8))  # after the call
    with tracer.start_as_current_span("execute_tool mcp__catalog__search", attributes=mcp) as span:
        fold_sdk_span(span, "MCP send tools/call search", _call("tools/call", 9))
        fold_sdk_span(span, "MCP send tools/call search", _call("tools/call", "10"))  # resent
    with tracer.start_as_current_span("execute_tool lookup") as span:
        fold_sdk_span(span, "MCP send tools/call search", _call("tools/call", 11))
    with tracer.start_as_current_span("execute_tool mcp__catalog__search", attributes=mcp) as span:
        fold_sdk_span(span, "MCP send notifications/cancelled", {"mcp.method.name": "tools/call"})

    ids = [(s.attributes or {}).get("jsonrpc.request.id") for s in exporter.get_finished_spans()]
    assert ids == ["7", "10", None, None]
