"""Journal records and their stored encoding.

One stream per session. Each event is one record: a message (a user message, an answer, a
tool result) or a compaction record (``HistoryCompacted``, ``CompactionRejected``, from
:mod:`ankka.runtime.records.compaction`). The conversation is the fold of the messages
(:mod:`.fold`); what the model is sent is the compaction fold
(:class:`ankka.runtime.engine.view.SentView`). A summary is never stored as a message:
compaction records it as ``HistoryCompacted``, which removes nothing. The encoding is the
stored format: change it only with a migration.

A record type has a ``kind`` (the stored event's kind), ``as_dict()`` and ``from_dict()``.
To add one (a task iteration, a suspended turn, an approval decision): write the frozen value
with those three, add it to :data:`Record` and :data:`RECORD_TYPES`, and pin its encoding in
``tests/unit/runtime/store/test_journal.py``. Nothing else changes: the stores keep
``(kind, body)`` pairs, the :class:`~ankka.runtime.store.journal.Journal` encodes and decodes
through here, and the fold passes over records that are not messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ankka._kernel.jsonload import loads
from ankka.runtime.records.accounting import UnwrittenCalls
from ankka.runtime.records.approvals import APPROVAL_RECORD_TYPES, ApprovalRecord
from ankka.runtime.records.compaction import CompactionRecord, CompactionRejected, HistoryCompacted
from ankka.runtime.records.conversations import (
    ConversationCutOff,
    ConversationEnded,
    ConversationResumed,
    TurnSkipped,
)
from ankka.runtime.records.iterations import IterationCompleted, IterationStarted
from ankka.runtime.records.judgments import JudgmentUsage
from ankka.runtime.records.mcp import McpToolsChanged, McpToolsRecord, SampledCall
from ankka.runtime.records.messages import (
    MESSAGE_TYPES,
    AssistantMessage,
    Message,
    ToolResult,
    UserMessage,
)
from ankka.runtime.records.session import SessionOpened

__all__ = ["RECORD_TYPES", "Entry", "Record", "StoredEvent", "decode", "encode", "loads"]

Record = (
    Message
    | McpToolsRecord
    | McpToolsChanged
    | SampledCall
    | CompactionRecord
    | UnwrittenCalls
    | SessionOpened
    | JudgmentUsage
    | ApprovalRecord
    | IterationStarted
    | IterationCompleted
    | TurnSkipped
    | ConversationEnded
    | ConversationCutOff
    | ConversationResumed
)
"""What a journal holds. Grows by union. An :class:`ApprovalRecord` is a suspended turn, a
decision, an approved call's start or a turn's end (:mod:`ankka.runtime.records.approvals`). An
:class:`McpToolsRecord` is the MCP tool listing a turn used (its digest, the list when it
changed; :class:`McpToolsChanged` when the runtime recorded only what changed); it is not
part of the conversation, nor are the compaction records, the accounting
of a turn that wrote no messages (:class:`UnwrittenCalls`), who opened the session
(:class:`SessionOpened`), the tokens a turn's judged guardrails spent
(:class:`JudgmentUsage`) or a task iteration's marks (:class:`IterationStarted`,
:class:`IterationCompleted`, recorded with its model's response)."""

RECORD_TYPES: tuple[type[Record], ...] = (
    UserMessage,
    AssistantMessage,
    ToolResult,
    McpToolsRecord,
    McpToolsChanged,
    SampledCall,
    HistoryCompacted,
    CompactionRejected,
    UnwrittenCalls,
    SessionOpened,
    JudgmentUsage,
    *APPROVAL_RECORD_TYPES,
    IterationStarted,
    IterationCompleted,
    TurnSkipped,
    ConversationEnded,
    ConversationCutOff,
    ConversationResumed,
)

_BY_KIND: dict[str, type[Record]] = {t.kind: t for t in RECORD_TYPES}

# A message is stored as its one rendering (``as_dict()``) spelled the way the stored format
# spelled it before the HTTP API existed: the role is the event's kind, and three fields keep
# their older names. Renaming them would need a migration; this table is the whole difference.
_MESSAGE_KINDS = frozenset(t.kind for t in MESSAGE_TYPES)
_STORED_NAMES = {"model_call": "call", "usage": "turn_usage", "tool_call_id": "call_id"}
_RENDERED_NAMES = {stored: shown for shown, stored in _STORED_NAMES.items()}


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as the store returns it: its place in the session's stream and when."""

    seq: int
    kind: str
    body: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Entry:
    """A decoded event: the record, its position in the session's stream, and when it was
    written."""

    seq: int
    at: datetime
    record: Record


def encode(record: Record) -> tuple[str, str]:
    """The (kind, JSON body) under which ``record`` is stored."""
    if type(record) not in RECORD_TYPES:
        raise TypeError(
            f"a {type(record).__name__} is not a journal record (a summary is recorded as "
            "HistoryCompacted, by compaction)"
        )
    data = record.as_dict()
    if record.kind in _MESSAGE_KINDS:
        data = {_STORED_NAMES.get(k, k): v for k, v in data.items() if k != "role"}
    return record.kind, json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def decode(kind: str, body: str) -> Record:
    """The record stored as ``(kind, body)``: the inverse of :func:`encode`."""
    record_type = _BY_KIND.get(kind)
    if record_type is None:
        raise ValueError(f"unknown journal event kind {kind!r}")
    data: dict[str, Any] = loads(body)
    if kind in _MESSAGE_KINDS:
        # In place: the dict is this call's own, and ``from_dict`` reads it by name only.
        for stored, shown in _RENDERED_NAMES.items():
            if stored in data:
                data[shown] = data.pop(stored)
    return record_type.from_dict(data)
