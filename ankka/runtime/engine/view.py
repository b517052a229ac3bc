"""The fold of a session for what the model is sent: the summary, then the verbatim rest.

Pure. Message records are appended; a ``HistoryCompacted`` record replaces every message at
or before its ``through`` position by its summary (an older summary included, so there is one
summary, never a stack); a ``CompactionRejected`` record changes nothing sent and is kept for
the retry pause. Between two compactions the view only grows at its end, so the request's
prefix stays byte-identical and providers' prompt caches keep hitting.

The other fold, every message (the whole conversation), is :mod:`ankka.runtime.records.fold`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ankka.runtime.records.compaction import CompactionRejected, HistoryCompacted
from ankka.runtime.records.messages import (
    MESSAGE_OVERHEAD,
    RECORDED_MESSAGES,
    AssistantMessage,
    Message,
    SummaryMessage,
    ToolResult,
    Usage,
    UserMessage,
    footprint,
)
from ankka.runtime.records.registry import Entry, Record

__all__ = ["SentView", "chars", "memory_chars"]


def chars(message: Message) -> int:
    """Characters a message puts in front of the model: its text, and a call's tool name and
    arguments. The limit is on these, not on tokens."""
    if isinstance(message, AssistantMessage):
        calls = sum(len(c.name) + len(c.arguments) for c in message.tool_calls)
        return len(message.content or "") + calls
    if isinstance(message, UserMessage | ToolResult | SummaryMessage):
        return len(message.content)
    raise TypeError(f"not a message: {message!r}")


def memory_chars(messages: Iterable[Message]) -> int:
    return sum(chars(m) for m in messages)


@dataclass(eq=False)
class SentView:
    """One session folded for the model. Mutable and incremental: :meth:`apply` each event
    after :attr:`position`, in order."""

    position: int = 0
    summary: HistoryCompacted | None = None
    seqs: list[int] = field(default_factory=list)
    verbatim: list[Message] = field(default_factory=list)
    verbatim_chars: int = 0
    verbatim_bytes: int = 0
    rejections: list[CompactionRejected] = field(default_factory=list)
    compaction_usage: Usage = field(default_factory=Usage)
    total_messages: int = 0
    compactions: int = 0
    rejected: int = 0

    def add(self, seq: int, record: Record) -> None:
        """Fold the record at position ``seq`` (records that are neither messages nor
        compaction records, such as MCP tool listings, only move the position)."""
        self.position = seq
        if isinstance(record, RECORDED_MESSAGES):  # the commonest record, tested first
            self.seqs.append(seq)
            self.verbatim.append(record)
            self.verbatim_chars += chars(record)
            self.verbatim_bytes += footprint(record)
            self.total_messages += 1
        elif isinstance(record, HistoryCompacted | CompactionRejected):
            self._record(record)

    def apply(self, entry: Entry) -> None:
        self.add(entry.seq, entry.record)

    def apply_all(self, entries: Iterable[Entry]) -> SentView:
        for entry in entries:
            self.apply(entry)
        return self

    def extend(self, after: int, records: Sequence[Record]) -> None:
        """Fold a batch this process just wrote after position ``after``."""
        for offset, record in enumerate(records, 1):
            self.add(after + offset, record)

    def _record(self, record: HistoryCompacted | CompactionRejected) -> None:
        self.compaction_usage = self.compaction_usage + record.usage
        if isinstance(record, CompactionRejected):
            self.rejections.append(record)
            self.rejected += 1
            return
        if self.summary is not None and record.through <= self.summary.through:
            return  # a late duplicate (another process compacted first): the newer stands
        keep = 0
        while keep < len(self.seqs) and self.seqs[keep] <= record.through:
            keep += 1
        dropped = self.verbatim[:keep]
        del self.seqs[:keep], self.verbatim[:keep]
        self.verbatim_chars -= memory_chars(dropped)
        self.verbatim_bytes -= sum(footprint(m) for m in dropped)
        self.summary = record
        self.compactions += 1
        self.rejections.clear()

    @property
    def summary_message(self) -> SummaryMessage | None:
        if self.summary is None:
            return None
        return SummaryMessage(self.summary.summary, self.summary.replaces, agent="compaction")

    @property
    def messages(self) -> list[Message]:
        """What the model is shown from memory: the summary (if any), then the rest."""
        summary = self.summary_message
        return self.verbatim if summary is None else [summary, *self.verbatim]

    @property
    def footprint(self) -> int:
        """An estimate of the bytes this fold holds (what a cache of folds is bounded by)."""
        summary = sys.getsizeof(self.summary.summary) if self.summary is not None else 0
        return summary + self.verbatim_bytes + len(self.rejections) * MESSAGE_OVERHEAD

    @property
    def chars(self) -> int:
        summary = len(self.summary.summary) if self.summary is not None else 0
        return summary + self.verbatim_chars
