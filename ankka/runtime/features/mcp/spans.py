"""What an MCP tool call adds to its ``execute_tool`` span (docs/observability.md).

The engine runs every tool in an ``execute_tool {tool}`` span (:mod:`ankka.runtime.engine.spans`)
current while the tool runs. The conventions' MCP client span (mcp.md, v1.41.0) is compatible
with it, and says an MCP instrumentation that finds the execution traced already adds its
attributes to that span rather than making another: so :func:`sending` does. A traced runtime
makes none of the MCP SDK's own spans (its tracer, :data:`~ankka.runtime.features.mcp.SDK_SCOPE`,
is quieted: ``ankka serve`` passes it to :func:`~ankka._kernel.tracing.from_environment`),
which would be a CLIENT span inside each ``execute_tool`` and a root span, a trace of its own,
for every health ping and background listing. The ``execute_tool`` span's W3C context goes in
the request's ``params._meta`` (:func:`meta`), so a traced MCP server's span is its child.
The id of the JSON-RPC request the SDK sends is folded in from the span the SDK would have made
(:func:`~ankka.runtime.features.mcp.fold_sdk_span`). :func:`peer` is also what the
``mcp.client.operation.duration`` histogram is labelled with (:mod:`.metrics`).

:func:`sending` and the others are called only while tracing is on
(:func:`ankka._kernel.tracing.active`): with it off a call pays that one test.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from opentelemetry import trace

from ankka._kernel import genai, tracing
from ankka.runtime.features.mcp.connection import CallFailed, McpConnection

__all__ = ["failed", "meta", "peer", "sending", "tool_error"]


def meta() -> dict[str, str]:
    """The current span's context for ``_meta`` (``traceparent``, ``tracestate``...)."""
    return tracing.carrier()


def peer(connection: McpConnection) -> dict[str, str | int]:
    """A ``tools/call`` through ``connection``: the method, transport, server and protocol."""
    url = urlsplit(connection.settings.url)
    attributes: dict[str, str | int] = {
        genai.MCP_METHOD_NAME: "tools/call",
        genai.NETWORK_TRANSPORT: "tcp",
        genai.NETWORK_PROTOCOL_NAME: "http",
    }
    if url.hostname:
        attributes[genai.SERVER_ADDRESS] = url.hostname
        attributes[genai.SERVER_PORT] = url.port or (443 if url.scheme == "https" else 80)
    if connection.protocol:
        attributes[genai.MCP_PROTOCOL_VERSION] = connection.protocol
    return attributes


def sending(connection: McpConnection, tool: str) -> None:
    """A ``tools/call`` of ``tool`` is sent through ``connection``: its MCP attributes."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    attributes = peer(connection)
    attributes["ankka.mcp.server"] = connection.name
    attributes["ankka.mcp.tool"] = tool
    if connection.session_id:
        attributes[genai.MCP_SESSION_ID] = connection.session_id
    span.set_attributes(attributes)


def failed(failure: CallFailed) -> None:
    """The call got no result: ``error.type`` (and the JSON-RPC error's code, if any)."""
    span = trace.get_current_span()
    span.set_attribute(genai.ERROR_TYPE, failure.error_type)
    if failure.code is not None:
        span.set_attribute(genai.RPC_RESPONSE_STATUS_CODE, str(failure.code))
    span.set_status(trace.StatusCode.ERROR)


def tool_error() -> None:
    """The server answered with ``isError``: ``error.type=tool_error``, as mcp.md says."""
    span = trace.get_current_span()
    span.set_attribute(genai.ERROR_TYPE, "tool_error")
    span.set_status(trace.StatusCode.ERROR)
