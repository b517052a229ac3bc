"""The MCP tool listing a turn used, as the journal records it. Pure values.

A server's tool ``search`` is offered to the model as ``mcp__<server>__search``
(:func:`offered_name`). Each turn records, per server, the digest of the listing it used
(:class:`McpToolsRecord`, kind ``mcp_tools``): the digest alone when the listing is the last
one recorded in the session; else, when the runtime still holds that last listing, what
changed since it (:class:`McpToolsChanged`, kind ``mcp_tools_changed``: every name in order
and the tools new or changed); else the whole listing. So a listing that changes on every
turn costs the journal its changes, not its size, and every digest in a session has its
listing at or before it: :func:`listing_in` folds a session's records back into the listing
a digest names. The ``mcp_tools`` record is stored as it always was. What a ``tools/list``
answer becomes is :mod:`ankka.runtime.features.mcp.listing`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ankka.runtime.records.messages import ModelCall

__all__ = [
    "ListedTool",
    "McpListingRecord",
    "McpToolsChanged",
    "McpToolsRecord",
    "SampledCall",
    "ToolListing",
    "changes",
    "listing_in",
    "offered_name",
]


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


@dataclass(frozen=True, slots=True)
class McpToolsChanged:
    """The listing of one server a turn used, as its changes since ``base`` (the digest of
    the last listing recorded in the session): every tool's name in the server's order, and
    the tools new or changed since ``base``; a name ``base`` had and ``names`` lacks was
    removed."""

    agent: str
    turn: str
    server: str
    digest: str
    base: str
    names: tuple[str, ...]
    put: tuple[ListedTool, ...]

    kind: ClassVar[str] = "mcp_tools_changed"

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "turn": self.turn,
            "server": self.server,
            "digest": self.digest,
            "base": self.base,
            "names": list(self.names),
            "put": [t.as_dict() for t in self.put],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> McpToolsChanged:
        return cls(
            str(data["agent"]),
            str(data["turn"]),
            str(data["server"]),
            str(data["digest"]),
            str(data["base"]),
            tuple(str(n) for n in data["names"]),
            tuple(ListedTool.from_dict(t) for t in data["put"]),
        )

    def apply(self, base: ToolListing) -> ToolListing:
        """The listing this record names, from the listing its ``base`` digest names."""
        tools = {t.name: t for t in base.tools}
        tools.update((t.name, t) for t in self.put)
        return ToolListing(self.server, tuple(tools[name] for name in self.names))


McpListingRecord = McpToolsRecord | McpToolsChanged
"""What a turn records of one server's listing."""


@dataclass(frozen=True, slots=True)
class SampledCall:
    """A model call the turn made for an MCP server's sampling request (during one of its
    calls). Listed by ``/calls``; its tokens are the turn's (a request turn's ``turn_usage``
    holds them, a task's iteration's usage too), so it is summed nowhere else."""

    kind: ClassVar[str] = "mcp_sampled_call"

    turn: str
    agent: str
    server: str
    call: ModelCall

    def as_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "agent": self.agent,
            "server": self.server,
            "call": self.call.as_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SampledCall:
        return cls(
            str(data["turn"]),
            str(data["agent"]),
            str(data["server"]),
            ModelCall.from_dict(data["call"]),
        )


def changes(old: ToolListing, new: ToolListing) -> tuple[tuple[str, ...], tuple[ListedTool, ...]]:
    """``new`` as changes to ``old``: every name in order, and the tools new or changed."""
    before = {t.name: t for t in old.tools}
    return tuple(t.name for t in new.tools), tuple(t for t in new.tools if before.get(t.name) != t)


def listing_in(records: Iterable[object], server: str, digest: str) -> ToolListing | None:
    """The listing of ``server`` that ``digest`` names, folded from a session's records in
    order (None when the records do not hold it)."""
    current: ToolListing | None = None
    found: ToolListing | None = None
    for record in records:
        if isinstance(record, McpToolsRecord) and record.server == server:
            if record.tools is not None:
                current = ToolListing(server, record.tools)
        elif isinstance(record, McpToolsChanged) and record.server == server:
            if current is not None and current.digest == record.base:
                current = record.apply(current)
            else:
                current = None  # its base is not the listing folded so far
        else:
            continue
        if current is not None and current.digest == digest:
            found = current
    return found
