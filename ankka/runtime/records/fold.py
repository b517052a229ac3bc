"""The conversation is the fold of a session's records. Pure.

Every message, in order: compaction removes nothing from it. Records that are not messages
(compaction records; task and approval records when they exist) leave it as it is. What the
model is sent, the summary and the verbatim rest, is the other fold:
:class:`ankka.runtime.engine.view.SentView`.
"""

from __future__ import annotations

from collections.abc import Iterable

from ankka.runtime.records.messages import AssistantMessage, Message, ToolResult, UserMessage
from ankka.runtime.records.registry import Record

__all__ = ["apply", "fold"]


def apply(conversation: list[Message], record: Record) -> None:
    """Fold one more record into ``conversation`` (in place)."""
    if isinstance(record, UserMessage | AssistantMessage | ToolResult):
        conversation.append(record)


def fold(records: Iterable[Record]) -> list[Message]:
    conversation: list[Message] = []
    for record in records:
        apply(conversation, record)
    return conversation
