"""The journal's compaction records: ``HistoryCompacted`` and ``CompactionRejected``.

Both are records of the session's own stream, beside its messages, and neither removes one:
the full history stays readable. ``HistoryCompacted`` says that, for what the model is sent,
the events at positions ``first..through`` are replaced by ``summary`` (which folds any
earlier summary in); ``CompactionRejected`` says a summary was made and not adopted, and why.
Both carry the summariser's model and usage, which is the session's compaction usage, apart
from its turns. Each is a journal record (a ``kind``, ``as_dict()``, ``from_dict()``; see
:mod:`ankka.runtime.records.registry`); the encoding is the stored format: change it only with
a migration.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from ankka.runtime.records.messages import Usage

__all__ = [
    "COMPACTED",
    "REJECTED",
    "CompactionRecord",
    "CompactionRejected",
    "HistoryCompacted",
]

COMPACTED = "history_compacted"
REJECTED = "compaction_rejected"


def _common(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "first": int(data["first"]),
        "through": int(data["through"]),
        "provider": str(data["provider"]),
        "model": str(data["model"]),
        "usage": Usage.from_dict(data["usage"]),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryCompacted:
    """``summary`` stands for events ``first..through`` (``first`` is always 1: an earlier
    summary is folded in, never stacked). ``replaces`` counts the messages it stands for;
    ``chars_before``/``chars_after`` measure memory as sent before and after."""

    kind: ClassVar[str] = COMPACTED

    first: int
    through: int
    summary: str
    replaces: int
    provider: str
    model: str
    usage: Usage
    chars_before: int
    chars_after: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "first": self.first,
            "through": self.through,
            "summary": self.summary,
            "replaces": self.replaces,
            "provider": self.provider,
            "model": self.model,
            "usage": self.usage.as_dict(),
            "chars_before": self.chars_before,
            "chars_after": self.chars_after,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HistoryCompacted:
        return cls(
            summary=str(data["summary"]),
            replaces=int(data["replaces"]),
            chars_before=int(data["chars_before"]),
            chars_after=int(data["chars_after"]),
            **_common(data),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionRejected:
    """A summary of events ``first..through`` that was not adopted. ``reason`` is a stable
    word (``empty``, ``longer_than_replaced``, ``identifier_missing``, ``check:<name>``);
    ``detail`` explains it in words; ``at`` (the compactor's clock) starts the retry pause."""

    kind: ClassVar[str] = REJECTED

    first: int
    through: int
    reason: str
    detail: str
    provider: str
    model: str
    usage: Usage
    at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {
            "first": self.first,
            "through": self.through,
            "reason": self.reason,
            "detail": self.detail,
            "provider": self.provider,
            "model": self.model,
            "usage": self.usage.as_dict(),
            "at": self.at.isoformat(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompactionRejected:
        return cls(
            reason=str(data["reason"]),
            detail=str(data["detail"]),
            at=datetime.fromisoformat(data["at"]),
            **_common(data),
        )


CompactionRecord = HistoryCompacted | CompactionRejected
