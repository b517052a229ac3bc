"""The conversation is the fold of a session's events. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from ankka.runtime.journal.events import Record, StoredEvent, decode
from ankka.runtime.judgments.usage import JudgmentUsage
from ankka.runtime.messages import Message, SummaryMessage

__all__ = ["apply", "fold"]


def apply(conversation: list[Message], message: Record) -> None:
    """Fold one more message into ``conversation`` (in place); other records pass.

    A compaction summary stands for the first ``replaces`` messages of the conversation as it
    was; an earlier summary among them is folded into it, never stacked.
    """
    if isinstance(message, JudgmentUsage):
        return
    if isinstance(message, SummaryMessage):
        del conversation[: message.replaces]
        conversation.insert(0, message)
    else:
        conversation.append(message)


def fold(events: Iterable[StoredEvent]) -> list[Message]:
    conversation: list[Message] = []
    for event in events:
        apply(conversation, decode(event.kind, event.body))
    return conversation
