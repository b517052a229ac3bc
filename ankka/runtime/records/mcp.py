"""The MCP tool listing a turn used, as the journal records it. Pure values.

A server's tool ``search`` is offered to the model as ``mcp__<server>__search``
(:func:`offered_name`). Each turn records, per server, the digest of the listing it used, and
the listing itself when it differs from the last one recorded in the session
(:class:`McpToolsRecord`), so a resumed turn or task can see the tools it saw. What a
``tools/list`` answer becomes is :mod:`ankka.runtime.features.mcp.listing`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["ListedTool", "McpToolsRecord", "ToolListing", "offered_name"]


def offered_name(server: str, tool: str) -> str:
    return f"mcp__{server}__{tool}"


@dataclass(frozen=True, slots=True)
class ListedTool:
    """One tool as the server listed it."""

    name: str
    description: str
    input_schema: Mapping[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ListedTool:
        return cls(str(data["name"]), str(data.get("description", "")), data["input_schema"])


@dataclass(frozen=True, slots=True)
class ToolListing:
    """A server's tools as one ``tools/list`` walk answered them, in the server's order."""

    server: str
    tools: tuple[ListedTool, ...]

    @property
    def digest(self) -> str:
        canonical = json.dumps(
            [t.as_dict() for t in self.tools], sort_keys=True, separators=(",", ":")
        )
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class McpToolsRecord:
    """The listing of one server a turn used: its digest, and the tools when they changed."""

    agent: str
    turn: str
    server: str
    digest: str
    tools: tuple[ListedTool, ...] | None = None

    kind: ClassVar[str] = "mcp_tools"

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "agent": self.agent,
            "turn": self.turn,
            "server": self.server,
            "digest": self.digest,
        }
        if self.tools is not None:
            data["tools"] = [t.as_dict() for t in self.tools]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> McpToolsRecord:
        tools = data.get("tools")
        return cls(
            str(data["agent"]),
            str(data["turn"]),
            str(data["server"]),
            str(data["digest"]),
            tuple(ListedTool.from_dict(t) for t in tools) if tools is not None else None,
        )
