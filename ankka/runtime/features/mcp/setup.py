"""Building a runtime's :class:`~.servers.McpServers` from the environment, at start.

Called by ``ankka serve`` (and tests). Refuses, naming it, any ``ANKKA_MCP_`` variable that is
no setting or names a server no agent lists, and a listed server without its URL. The SDK is
imported only here and only when some agent lists a server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.agents import Service
from ankka.runtime.declare.mcp import CREDENTIALS_VARIABLE, PREFIX
from ankka.runtime.features.mcp.config import parse_environment

if TYPE_CHECKING:
    from ankka.runtime.features.mcp.servers import McpServers

__all__ = ["declared_servers", "sampling_servers", "servers_from_environment"]


def declared_servers(service: Service) -> list[str]:
    """The MCP servers the service's agents list, request and autonomous alike."""
    names = {s.name for d in service.agents.values() for s in d.mcp_servers}
    names.update(s.name for a in service.autonomous_agents.values() for s in a.servers)
    return sorted(names)


def servers_from_environment(
    service: Service,
    environ: Mapping[str, str],
    *,
    registry: CollectorRegistry | None = None,
    redirect_base: str | None = None,
) -> McpServers | None:
    """The service's MCP servers, or None when no agent lists one and nothing is configured."""
    declared = declared_servers(service)
    if not declared and not any(v.startswith(PREFIX) for v in environ):
        return None
    settings = parse_environment(environ, declared)
    if not settings:
        return None
    sampled = sampling_servers(service)
    settings = {n: replace(s, sampling=n in sampled) for n, s in settings.items()}
    try:
        from ankka.runtime.features.mcp.credentials import store_from
        from ankka.runtime.features.mcp.servers import DEFAULT_REDIRECT_BASE, McpServers
    except ImportError as exc:
        raise ConfigurationError(
            f"agents of {service.name!r} list MCP servers ({', '.join(declared)}), which need "
            "the official MCP SDK: pip install 'ankka[mcp]'"
        ) from exc
    return McpServers(
        settings,
        registry=registry,
        credentials=store_from(environ.get(CREDENTIALS_VARIABLE)),
        redirect_base=redirect_base or DEFAULT_REDIRECT_BASE,
        connection_options={"asks": True},
    )


def sampling_servers(service: Service) -> frozenset[str]:
    """The servers some agent lets ask its model (``McpServer(..., sampling=True)``)."""
    names = {s.name for d in service.agents.values() for s in d.mcp_servers if s.sampling}
    tasks = service.autonomous_agents.values()
    names.update(s.name for a in tasks for s in a.servers if s.sampling)
    return frozenset(names)
