"""The runtime's shared vocabulary: messages, tool calls, usage, model calls.

Pure values, no I/O. The loop produces them, the journal stores them as events, providers
translate them to and from their wire formats, and the HTTP API renders them.

Each message has one rendering, ``as_dict()`` (its ``role`` first, then its fields, then
``agent`` and ``turn``), and its inverse, ``from_dict()``. The HTTP API shows that rendering
as is; the journal stores it under the message's ``kind`` (:mod:`ankka.runtime.records.registry`).
``from_dict`` reads ``agent`` and ``turn`` as empty when absent: records written before either
existed have neither. It is on a cold fold's path (every message of a session not in the fold
cache), so it builds the values directly, positionally.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "MESSAGE_OVERHEAD",
    "MESSAGE_TYPES",
    "RECORDED_MESSAGES",
    "AssistantMessage",
    "Message",
    "ModelCall",
    "ProviderState",
    "SummaryMessage",
    "ToolCall",
    "ToolResult",
    "Usage",
    "UserMessage",
    "footprint",
]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens, never money: there is no price table, so cost is unknown, not zero."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        return cls(
            int(data.get("input_tokens", 0)),
            int(data.get("output_tokens", 0)),
            int(data.get("cache_read_tokens", 0)),
            int(data.get("cache_write_tokens", 0)),
        )


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call, as accounted with the turn that made it."""

    provider: str
    model: str
    agent: str
    latency_ms: float
    usage: Usage

    def as_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "agent": self.agent,
            "latency_ms": round(self.latency_ms, 3),
            "usage": self.usage.as_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelCall:
        return cls(
            str(data["provider"]),
            str(data["model"]),
            str(data["agent"]),
            float(data["latency_ms"]),
            Usage.from_dict(data["usage"]),
        )


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A model's request to run a tool. ``arguments`` is the JSON text exactly as the model
    wrote it: kept verbatim so replaying it to the model is byte-identical, and so arguments
    that do not decode can still be recorded and answered with an error result."""

    id: str
    name: str
    arguments: str

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls(str(data["id"]), str(data["name"]), str(data["arguments"]))


@dataclass(frozen=True, slots=True)
class ProviderState:
    """A vendor's opaque state for one answer: OpenAI's reasoning items, Anthropic's thinking
    blocks. ``wire`` names the wire format that made it (``"responses"``, ``"anthropic"``), so
    one provider never replays another's. Providers replay it within the current turn only,
    and it is never stored: a session is ankka's, not a vendor's (the journal's encoding
    leaves it out, so a recorded answer comes back without it)."""

    wire: str
    items: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class UserMessage:
    """What the caller said. ``agent`` is the agent the turn was addressed to."""

    role: ClassVar[str] = "user"
    kind: ClassVar[str] = "user_message"

    content: str
    agent: str = ""
    turn: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content, "agent": self.agent, "turn": self.turn}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UserMessage:
        return cls(data["content"], str(data.get("agent", "")), str(data.get("turn", "")))


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """A model's answer: text, tool calls, or both.

    ``call`` accounts for the model call that produced it; ``turn_usage`` is set on the last
    answer of a turn only, and sums every call of that turn. ``provider_state`` is the
    vendor's opaque state of the call (see :class:`ProviderState`): kept on the answers of the
    turn in flight so the next call of that turn can replay it, never journaled, and left out
    of equality and the repr.
    """

    role: ClassVar[str] = "assistant"
    kind: ClassVar[str] = "assistant_message"

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    agent: str = ""
    turn: str = ""
    call: ModelCall | None = None
    turn_usage: Usage | None = None
    provider_state: ProviderState | None = field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """Without ``provider_state``: a vendor's state is never shown nor stored."""
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [c.as_dict() for c in self.tool_calls]
        if self.call is not None:
            data["model_call"] = self.call.as_dict()
        if self.turn_usage is not None:
            data["usage"] = self.turn_usage.as_dict()
        data["agent"] = self.agent
        data["turn"] = self.turn
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AssistantMessage:
        call, usage, calls = data.get("model_call"), data.get("usage"), data.get("tool_calls", ())
        return cls(
            data["content"],
            tuple([ToolCall.from_dict(c) for c in calls]),
            str(data.get("agent", "")),
            str(data.get("turn", "")),
            ModelCall.from_dict(call) if call is not None else None,
            Usage.from_dict(usage) if usage is not None else None,
        )


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's answer to one call; ``is_error`` when the tool failed or its arguments did not
    decode (the model sees the error and may correct itself)."""

    role: ClassVar[str] = "tool"
    kind: ClassVar[str] = "tool_result"

    call_id: str
    name: str
    content: str
    is_error: bool = False
    agent: str = ""
    turn: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "tool_call_id": self.call_id,
            "name": self.name,
            "content": self.content,
            "is_error": self.is_error,
            "agent": self.agent,
            "turn": self.turn,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResult:
        return cls(
            data["tool_call_id"],
            data["name"],
            data["content"],
            bool(data["is_error"]),
            str(data.get("agent", "")),
            str(data.get("turn", "")),
        )


@dataclass(frozen=True, slots=True)
class SummaryMessage:
    """A compaction summary standing for the messages it replaced."""

    role: ClassVar[str] = "summary"
    kind: ClassVar[str] = "compaction_summary"

    content: str
    replaces: int = 0
    turn: str = ""
    agent: str = field(default="")

    def as_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "content": self.content,
            "replaces": self.replaces,
            "agent": self.agent,
            "turn": self.turn,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SummaryMessage:
        turn, agent = str(data.get("turn", "")), str(data.get("agent", ""))
        return cls(data["content"], int(data.get("replaces", 0)), turn, agent)


Message = UserMessage | AssistantMessage | ToolResult | SummaryMessage

MESSAGE_TYPES: tuple[type[Message], ...] = (
    UserMessage,
    AssistantMessage,
    ToolResult,
    SummaryMessage,
)

RECORDED_MESSAGES: tuple[type[UserMessage | AssistantMessage | ToolResult], ...] = (
    UserMessage,
    AssistantMessage,
    ToolResult,
)
"""The messages a session's journal records (a summary is recorded as its compaction); a
tuple, so the folds' ``isinstance`` test of their commonest record is one call."""


MESSAGE_OVERHEAD = 512
"""Bytes a message held in memory takes beside its strings (its objects, its call's figures;
measured in tests/unit/runtime/engine/test_session_cache_bytes.py)."""


def footprint(message: Message) -> int:
    """An estimate of the bytes a message holds in memory, for the caches that keep messages
    (bounded by bytes): its strings as the interpreter stores them (one to four bytes a
    character), and :data:`MESSAGE_OVERHEAD`."""
    size = MESSAGE_OVERHEAD
    if isinstance(message, AssistantMessage):
        size += sys.getsizeof(message.content or "")
        size += sum(sys.getsizeof(c.arguments) + sys.getsizeof(c.name) for c in message.tool_calls)
    else:
        size += sys.getsizeof(message.content)
    return size
