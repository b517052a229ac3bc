"""The journal's compaction records: ``HistoryCompacted`` and ``CompactionRejected``.

Both are events of the session's own stream, beside its messages, and neither removes one:
the full history stays readable. ``HistoryCompacted`` says that, for what the model is sent,
the events at positions ``1..through`` are replaced by ``summary`` (which folds any earlier
summary in); ``CompactionRejected`` says a summary was made and not adopted, and why. Both
carry the summariser's model and usage, which is the session's compaction usage, apart from
its turns. The encoding is the stored format: change it only with a migration.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ankka.runtime.messages import Usage

__all__ = [
    "COMPACTED",
    "KINDS",
    "REJECTED",
    "CompactionRecord",
    "CompactionRejected",
    "HistoryCompacted",
    "decode_record",
    "encode_record",
]

COMPACTED = "history_compacted"
REJECTED = "compaction_rejected"
KINDS = frozenset({COMPACTED, REJECTED})


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryCompacted:
    """``summary`` stands for events ``first..through`` (``first`` is always 1: an earlier
    summary is folded in, never stacked). ``replaces`` counts the messages it stands for;
    ``chars_before``/``chars_after`` measure memory as sent before and after."""

    first: int
    through: int
    summary: str
    replaces: int
    provider: str
    model: str
    usage: Usage
    chars_before: int
    chars_after: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionRejected:
    """A summary of events ``first..through`` that was not adopted. ``reason`` is a stable
    word (``empty``, ``longer_than_replaced``, ``identifier_missing``, ``check:<name>``);
    ``detail`` explains it in words; ``at`` (the compactor's clock) starts the retry pause."""

    first: int
    through: int
    reason: str
    detail: str
    provider: str
    model: str
    usage: Usage
    at: datetime


CompactionRecord = HistoryCompacted | CompactionRejected


def encode_record(record: CompactionRecord) -> tuple[str, str]:
    """The (kind, JSON body) under which ``record`` is journaled."""
    data: dict[str, Any] = {
        "first": record.first,
        "through": record.through,
        "provider": record.provider,
        "model": record.model,
        "usage": record.usage.as_dict(),
    }
    if isinstance(record, HistoryCompacted):
        kind = COMPACTED
        data |= {
            "summary": record.summary,
            "replaces": record.replaces,
            "chars_before": record.chars_before,
            "chars_after": record.chars_after,
        }
    else:
        kind = REJECTED
        data |= {"reason": record.reason, "detail": record.detail, "at": record.at.isoformat()}
    return kind, json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def decode_record(kind: str, body: str) -> CompactionRecord:
    data = json.loads(body)
    common: dict[str, Any] = {
        "first": int(data["first"]),
        "through": int(data["through"]),
        "provider": str(data["provider"]),
        "model": str(data["model"]),
        "usage": Usage.from_dict(data["usage"]),
    }
    if kind == COMPACTED:
        return HistoryCompacted(
            summary=str(data["summary"]),
            replaces=int(data["replaces"]),
            chars_before=int(data["chars_before"]),
            chars_after=int(data["chars_after"]),
            **common,
        )
    if kind == REJECTED:
        return CompactionRejected(
            reason=str(data["reason"]),
            detail=str(data["detail"]),
            at=datetime.fromisoformat(data["at"]),
            **common,
        )
    raise ValueError(f"{kind!r} is not a compaction record")
