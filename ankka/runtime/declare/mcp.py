"""How an agent lists an MCP server: by name, as a string or an :class:`McpServer`.

Where the server is and what it is sent come from ``ANKKA_MCP_<SERVER>_*`` (see
:mod:`ankka.runtime.features.mcp.config`), never from code; a server's name is checked here,
where it is declared, so that those variables' names are unambiguous. Pure;
``ankka.runtime.declare.agents`` imports it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ankka._kernel.errors import ConfigurationError

__all__ = [
    "CALLBACK_PATH",
    "CREDENTIALS_VARIABLE",
    "HEADER_INFIX",
    "PREFIX",
    "McpServer",
    "check_server_name",
    "env_name",
    "normalise",
]

PREFIX = "ANKKA_MCP_"
CREDENTIALS_VARIABLE = "ANKKA_MCP_CREDENTIALS"  # no server's: where OAuth credentials live
CALLBACK_PATH = "/v1/mcp/oauth/callback"  # where a person comes back after an OAuth consent
HEADER_INFIX = "HEADER"
SERVER_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


def env_name(server: str, suffix: str) -> str:
    return f"{PREFIX}{server.upper().replace('-', '_')}_{suffix}"


def check_server_name(name: str, *, where: str) -> None:
    if not SERVER_NAME.match(name):
        raise ConfigurationError(
            f"{where}: MCP server name {name!r} must be lower-case letters, digits, '_' or '-'"
        )
    if env_name(name, "")[:-1] == CREDENTIALS_VARIABLE:
        raise ConfigurationError(
            f"{where}: MCP server name {name!r} is taken by {CREDENTIALS_VARIABLE}; rename it"
        )
    if f"_{HEADER_INFIX}_" in env_name(name, ""):
        raise ConfigurationError(
            f"{where}: MCP server name {name!r} contains '{HEADER_INFIX.lower()}' between "
            f"separators, which makes its {PREFIX}* variables ambiguous; rename it"
        )


@dataclass(frozen=True, slots=True)
class McpServer:
    """An MCP server an agent uses. ``requires_approval`` (``True`` for every tool, or the
    server's tool names) makes those calls wait for a person's decision (docs/approvals.md);
    ``ANKKA_MCP_<SERVER>_REQUIRES_APPROVAL`` adds to it. ``sampling=True`` lets the server
    ask the agent's own model for a completion during a call (``sampling/createMessage``),
    accounted in the agent's usage; else such a request is refused (docs/mcp.md)."""

    name: str
    requires_approval: bool | tuple[str, ...] = False
    sampling: bool = False

    def __post_init__(self) -> None:
        check_server_name(self.name, where="McpServer")

    def needs_approval(self, tool: str) -> bool:
        """Whether the server's ``tool`` (its own name) waits for a decision."""
        approval = self.requires_approval
        return approval is True or (isinstance(approval, tuple) and tool in approval)


def normalise(servers: Iterable[str | McpServer], *, agent: str) -> tuple[McpServer, ...]:
    """The agent's servers as declarations, each once."""
    out: list[McpServer] = []
    for server in servers:
        declared = server if isinstance(server, McpServer) else McpServer(server)
        if any(d.name == declared.name for d in out):
            raise ConfigurationError(f"agent {agent!r} lists MCP server {declared.name!r} twice")
        out.append(declared)
    return tuple(out)
