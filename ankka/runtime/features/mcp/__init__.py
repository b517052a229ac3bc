"""MCP servers as tools: an agent lists servers by name and their tools join its turns.

- :mod:`.declaration`: how an agent lists a server (pure; imported by
``ankka.runtime.declare.agents``);
- :mod:`.config`: ``ANKKA_MCP_<SERVER>_*`` settings (pure);
- :mod:`.listing`: tool names, the listing's digest, the journal record, description checks;
- :mod:`.results`: argument checks, result mapping, redaction and result guardrails (pure);
- :mod:`.connection`: one session per server, owned by one task (the official SDK, I/O);
- :mod:`.servers`: every server of a runtime, readiness, and the tools a turn gets (I/O).

The SDK (``pip install 'ankka[mcp]'``) is imported only by the I/O modules, only when an
agent lists a server. See docs/mcp.md.
"""

from typing import Any

from ankka._kernel import genai
from ankka.runtime.declare.mcp import McpServer

__all__ = ["SDK_SCOPE", "McpServer", "fold_sdk_span"]

SDK_SCOPE = "mcp-python-sdk"
"""The MCP SDK's tracer: a traced runtime makes none of its spans (:mod:`.spans` says why),
but folds what they know into its own (:func:`fold_sdk_span`)."""


def fold_sdk_span(current: Any, name: str, attributes: dict[str, Any]) -> None:
    """The SDK would start a span for a request it sends: when it is a ``tools/call`` sent
    inside an MCP tool's ``execute_tool`` span (``current``, marked ``ankka.mcp.tool`` by
    :func:`.spans.sending`), that span gets the request's ``jsonrpc.request.id``, the id the SDK
    puts on the wire. A call the SDK sends again (its re-list after a header mismatch, the
    runtime's once more after a forgotten session) leaves the id of the last one sent, whose
    answer is the call's. Its ``tools/list`` and pings are not tool calls: left alone."""
    request = attributes.get(genai.JSONRPC_REQUEST_ID)
    if attributes.get(genai.MCP_METHOD_NAME) != "tools/call" or request is None:
        return
    own = getattr(current, "attributes", None) or {}
    if "ankka.mcp.tool" in own and current.is_recording():
        current.set_attribute(genai.JSONRPC_REQUEST_ID, str(request))
