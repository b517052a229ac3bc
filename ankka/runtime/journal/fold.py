"""The conversation is the fold of a session's records. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from ankka.runtime.journal.events import Record
from ankka.runtime.messages import MESSAGE_TYPES, Message, SummaryMessage

__all__ = ["apply", "fold"]


def apply(conversation: list[Message], record: Record) -> None:
    """Fold one more record into ``conversation`` (in place).

    A compaction summary stands for the first ``replaces`` messages of the conversation as it
    was; an earlier summary among them is folded into it, never stacked. A record that is not
    a message (a task or approval record, when they exist) leaves the conversation as it is.
    """
    if isinstance(record, SummaryMessage):
        del conversation[: record.replaces]
        conversation.insert(0, record)
    elif isinstance(record, MESSAGE_TYPES):
        conversation.append(record)


def fold(records: Iterable[Record]) -> list[Message]:
    conversation: list[Message] = []
    for record in records:
        apply(conversation, record)
    return conversation
