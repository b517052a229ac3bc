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

Called only while tracing is on (:func:`ankka._kernel.tracing.active`): with it off a call
pays that one test.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from opentelemetry import trace

from ankka._kernel import genai, tracing
from ankka.runtime.features.mcp.connection import CallFailed, McpConnection

__all__ = ["failed", "meta", "sending", "tool_error"]


def meta() -> dict[str, str]:
    """The current span's context for ``_meta`` (``traceparent``, ``tracestate``...)."""
    return tracing.carrier()


def sending(connection: McpConnection, tool: str) -> None:
    """A ``tools/call`` of ``tool`` is sent through ``connection``: its MCP attributes."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    url = urlsplit(connection.settings.url)
    attributes: dict[str, str | int] = {
        genai.MCP_METHOD_NAME: "tools/call",
        genai.NETWORK_TRANSPORT: "tcp",
        genai.NETWORK_PROTOCOL_NAME: "http",
        "ankka.mcp.server": connection.name,
        "ankka.mcp.tool": tool,
    }
    if url.hostname:
        attributes[genai.SERVER_ADDRESS] = url.hostname
        attributes[genai.SERVER_PORT] = url.port or (443 if url.scheme == "https" else 80)
    if connection.protocol:
        attributes[genai.MCP_PROTOCOL_VERSION] = connection.protocol
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
