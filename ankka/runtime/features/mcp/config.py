"""MCP servers from the environment: ``ANKKA_MCP_<SERVER>_<SETTING>``.

An agent lists MCP servers by name (``@service.agent("shop", mcp_servers=["catalog"])``); where
each one is and which headers it is sent come from the environment, so a manifest's Secret
becomes a header without the code knowing it:

- ``ANKKA_MCP_<SERVER>_URL``: the server's Streamable HTTP endpoint (required);
- ``ANKKA_MCP_<SERVER>_HEADER_<NAME>``: a header sent with every request (``_`` in NAME becomes
  ``-``: ``HEADER_X_API_KEY`` is ``x-api-key``). Values are secrets: never logged, journaled,
  shown in errors or in metrics;
- ``ANKKA_MCP_<SERVER>_TIMEOUT``: seconds one call may take (default 60);
- ``ANKKA_MCP_<SERVER>_REQUIRES_APPROVAL``: ``all`` or a comma list of tool names whose calls
  wait for a person's decision (docs/approvals.md);
- ``ANKKA_MCP_<SERVER>_OAUTH`` and ``_OAUTH_*``: how the server's OAuth tokens are obtained
  (:mod:`.oauth_settings`);
- ``ANKKA_MCP_<SERVER>_PING_INTERVAL``: seconds between health pings (default 15; 0: none).
- ``ANKKA_MCP_<SERVER>_ELICITATION_TIMEOUT``: seconds a person has to answer a question the
  server asks during a call (default 600).

One variable is no server's: ``ANKKA_MCP_CREDENTIALS`` says where OAuth credentials are kept
(:mod:`.credentials`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.mcp import CREDENTIALS_VARIABLE, HEADER_INFIX, PREFIX, env_name
from ankka.runtime.features.mcp.oauth_settings import OAUTH_SUFFIXES, OAuthSettings, parse_oauth

__all__ = [
    "DEFAULT_TIMEOUT",
    "SUFFIXES",
    "McpServerSettings",
    "parse_environment",
]

SUFFIXES: dict[str, str] = {
    "URL": "the server's Streamable HTTP endpoint, e.g. http://catalog:8000/mcp",
    "TIMEOUT": "seconds one tool call may take (default 60)",
    "REQUIRES_APPROVAL": "'all' or a comma list of tool names that need a decision",
    "PING_INTERVAL": "seconds between health pings (default 15; 0 turns them off)",
    "ELICITATION_TIMEOUT": "seconds a person has to answer the server's question (default 600)",
    **OAUTH_SUFFIXES,
}
DEFAULT_TIMEOUT = 60.0
DEFAULT_PING_INTERVAL = 15.0
DEFAULT_ELICITATION_TIMEOUT = 600.0
_HEADER_NAME = re.compile(r"^[A-Z0-9][A-Z0-9_]*$")
MAX_HEADER_VALUE = 8192


@dataclass(frozen=True, slots=True)
class McpServerSettings:
    """One configured server. ``headers`` maps lower-case header names to secret values."""

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    requires_approval: bool | tuple[str, ...] = False
    """``True`` (every tool) or tool names whose calls wait for a decision."""
    oauth: OAuthSettings | None = None
    ping_interval: float = DEFAULT_PING_INTERVAL
    elicitation_timeout: float = DEFAULT_ELICITATION_TIMEOUT
    """Seconds a person has to answer a question the server asks during a call."""
    sampling: bool = False
    """Whether some agent allows this server's sampling requests (``McpServer(sampling=)``)."""

    def needs_approval(self, tool: str) -> bool:
        approval = self.requires_approval
        return approval is True or (isinstance(approval, tuple) and tool in approval)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The header values, longest first (so redaction replaces whole values)."""
        values = {v for v in self.headers.values() if v}
        if self.oauth is not None:
            values.update(self.oauth.secrets)
        return tuple(sorted(values, key=len, reverse=True))

    def __repr__(self) -> str:
        shown = {k: "***" for k in self.headers}
        return (
            f"McpServerSettings(name={self.name!r}, url={self.url!r}, headers={shown}, "
            f"oauth={self.oauth!r})"
        )


def parse_environment(
    environ: Mapping[str, str], declared: Iterable[str]
) -> dict[str, McpServerSettings]:
    """The settings of every ``declared`` server; a ConfigurationError names the first fault."""
    servers = sorted(set(declared))
    by_env = {env_name(s, "")[len(PREFIX) : -1]: s for s in servers}
    values: dict[str, dict[str, str]] = {s: {} for s in servers}
    headers: dict[str, dict[str, str]] = {s: {} for s in servers}
    for variable in sorted(environ):
        if not variable.startswith(PREFIX) or variable == CREDENTIALS_VARIABLE:
            continue
        server, setting = _split(variable, by_env, servers)
        if setting.startswith(HEADER_INFIX + "_"):
            header = setting[len(HEADER_INFIX) + 1 :]
            value = environ[variable]
            if not _HEADER_NAME.match(header):
                raise ConfigurationError(f"{variable}: {header!r} is not a header name")
            if len(value) > MAX_HEADER_VALUE or "\n" in value or "\r" in value:
                # The value is a secret: say what is wrong with it, never what it is.
                raise ConfigurationError(
                    f"{variable}: the value is longer than {MAX_HEADER_VALUE} characters or "
                    "spans lines; a header value is one line"
                )
            headers[server][header.lower().replace("_", "-")] = value
        else:
            values[server][setting] = environ[variable]
    return {s: _server(s, values[s], headers[s]) for s in servers}


def _split(variable: str, by_env: Mapping[str, str], servers: list[str]) -> tuple[str, str]:
    rest = variable[len(PREFIX) :]
    for env_server in sorted(by_env, key=len, reverse=True):
        if rest.startswith(env_server + "_"):
            setting = rest[len(env_server) + 1 :]
            if setting in SUFFIXES or setting.startswith(HEADER_INFIX + "_"):
                return by_env[env_server], setting
    listed = ", ".join(servers) or "none"
    settings = ", ".join([*SUFFIXES, f"{HEADER_INFIX}_<NAME>"])
    raise ConfigurationError(
        f"{variable} is not a setting: MCP settings are {PREFIX}<SERVER>_<SETTING> with SETTING "
        f"one of {settings}, and SERVER one the agents list (they list: {listed})"
    )


def _server(name: str, values: dict[str, str], headers: dict[str, str]) -> McpServerSettings:
    url = values.get("URL", "").strip()
    if not url:
        raise ConfigurationError(
            f"an agent lists MCP server {name!r} but {env_name(name, 'URL')} is not set: set it "
            "to the server's Streamable HTTP endpoint (e.g. http://127.0.0.1:8000/mcp)"
        )
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"{env_name(name, 'URL')}={url!r} is not an http(s) URL")
    approval = values.get("REQUIRES_APPROVAL", "").strip()
    requires: bool | tuple[str, ...] = False
    if approval.lower() == "all":
        requires = True
    elif approval and approval.lower() not in ("false", "none", "no"):
        requires = tuple(t.strip() for t in approval.split(",") if t.strip())
    timeout = DEFAULT_TIMEOUT
    raw = values.get("TIMEOUT")
    if raw is not None:
        try:
            timeout = float(raw)
        except ValueError:
            timeout = -1.0
        if not 0 < timeout <= 3600:
            raise ConfigurationError(
                f"{env_name(name, 'TIMEOUT')}={raw!r} is not a number of seconds in (0, 3600]"
            )
    oauth = parse_oauth(values, lambda suffix: env_name(name, suffix))
    ping = _seconds(name, values, "PING_INTERVAL", DEFAULT_PING_INTERVAL, low=0.0)
    asking = _seconds(name, values, "ELICITATION_TIMEOUT", DEFAULT_ELICITATION_TIMEOUT, low=1.0)
    return McpServerSettings(name, url, headers, timeout, requires, oauth, ping, asking)


def _seconds(
    name: str, values: dict[str, str], suffix: str, default: float, *, low: float
) -> float:
    raw = values.get(suffix)
    if raw is None:
        return default
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not low <= seconds <= 3600:
        raise ConfigurationError(
            f"{env_name(name, suffix)}={raw!r} is not a number of seconds in [{low:g}, 3600]"
        )
    return seconds
