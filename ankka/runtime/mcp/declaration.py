"""How an agent lists an MCP server: by name, as a string or an :class:`McpServer`.

Where the server is and what it is sent come from ``ANKKA_MCP_<SERVER>_*`` (see
:mod:`.config`), never from code. Pure; ``ankka.runtime.agents`` imports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.mcp.config import check_server_name

__all__ = ["McpServer", "normalise"]


@dataclass(frozen=True, slots=True)
class McpServer:
    """An MCP server an agent uses. ``requires_approval`` (``True`` for every tool, or tool
    names) is refused until approvals are built: an unchecked call would be worse than none."""

    name: str
    requires_approval: bool | tuple[str, ...] = False

    def __post_init__(self) -> None:
        check_server_name(self.name, where="McpServer")
        if self.requires_approval:
            approval = self.requires_approval
            which = "all its tools" if approval is True else ", ".join(approval or ())
            raise ConfigurationError(
                f"MCP server {self.name!r} is declared as requiring approval ({which}), and "
                "approvals are not available in this version of ankka; remove "
                "requires_approval, or do not list the server until approvals land"
            )


def normalise(servers: Iterable[str | McpServer], *, agent: str) -> tuple[McpServer, ...]:
    """The agent's servers as declarations, each once."""
    out: list[McpServer] = []
    for server in servers:
        declared = server if isinstance(server, McpServer) else McpServer(server)
        if any(d.name == declared.name for d in out):
            raise ConfigurationError(f"agent {agent!r} lists MCP server {declared.name!r} twice")
        out.append(declared)
    return tuple(out)
