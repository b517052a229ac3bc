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

from ankka.runtime.declare.mcp import McpServer

__all__ = ["SDK_SCOPE", "McpServer"]

SDK_SCOPE = "mcp-python-sdk"
"""The MCP SDK's tracer: a traced runtime makes none of its spans (:mod:`.spans` says why)."""
