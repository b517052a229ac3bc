"""Journal events and their JSON encoding.

One stream per session. Each event is one message (a user message, an answer, a tool result,
a compaction summary); the conversation is the fold of the events (:mod:`.fold`). The encoding
is the stored format: change it only with a migration.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ankka.runtime.judgments.usage import JudgmentUsage
from ankka.runtime.messages import (
    AssistantMessage,
    Message,
    ModelCall,
    SummaryMessage,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)

__all__ = ["Record", "StoredEvent", "decode", "encode"]

Record = Message | JudgmentUsage
"""What a journal holds: the conversation's messages, and records the fold passes over."""

USER = "user_message"
ASSISTANT = "assistant_message"
TOOL = "tool_result"
SUMMARY = "compaction_summary"


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as the store returns it: its place in the session's stream and when."""

    seq: int
    kind: str
    body: str
    at: datetime


def encode(message: Record) -> tuple[str, str]:
    """The (kind, JSON body) under which ``message`` is stored."""
    data: dict[str, Any]
    if isinstance(message, JudgmentUsage):
        return message.kind, json.dumps(message.as_dict(), separators=(",", ":"))
    if isinstance(message, UserMessage):
        kind = USER
        data = {"content": message.content}
    elif isinstance(message, AssistantMessage):
        kind = ASSISTANT
        data = {"content": message.content}
        if message.tool_calls:
            data["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
            ]
        if message.call is not None:
            data["call"] = message.call.as_dict()
        if message.turn_usage is not None:
            data["turn_usage"] = message.turn_usage.as_dict()
    elif isinstance(message, ToolResult):
        kind = TOOL
        data = {
            "call_id": message.call_id,
            "name": message.name,
            "content": message.content,
            "is_error": message.is_error,
        }
    else:
        kind = SUMMARY
        data = {"content": message.content, "replaces": message.replaces}
    data["agent"] = message.agent
    data["turn"] = message.turn
    return kind, json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def decode(kind: str, body: str) -> Record:
    data = json.loads(body)
    if kind == JudgmentUsage.kind:
        return JudgmentUsage.from_dict(data)
    agent, turn = str(data.get("agent", "")), str(data.get("turn", ""))
    if kind == USER:
        return UserMessage(data["content"], agent, turn)
    if kind == ASSISTANT:
        calls = tuple(
            ToolCall(c["id"], c["name"], c["arguments"]) for c in data.get("tool_calls", ())
        )
        call = ModelCall.from_dict(data["call"]) if "call" in data else None
        usage = Usage.from_dict(data["turn_usage"]) if "turn_usage" in data else None
        return AssistantMessage(data["content"], calls, agent, turn, call, usage)
    if kind == TOOL:
        return ToolResult(
            data["call_id"], data["name"], data["content"], bool(data["is_error"]), agent, turn
        )
    if kind == SUMMARY:
        return SummaryMessage(data["content"], int(data.get("replaces", 0)), turn, agent)
    raise ValueError(f"unknown journal event kind {kind!r}")
