"""What a compaction decides, from values only: whether to start, and what to record.

``due`` says whether a session should be summarised now (over its start, not pausing after
rejections); ``verdict_record`` turns a summary and its cut into the record to journal.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ankka.runtime.declare.compaction import Compaction
from ankka.runtime.engine.view import SentView
from ankka.runtime.features.compaction.checks import check_summary
from ankka.runtime.features.compaction.cut import Cut
from ankka.runtime.features.compaction.summariser import Summary
from ankka.runtime.records.compaction import CompactionRecord, CompactionRejected, HistoryCompacted

__all__ = ["FIRST_PAUSE", "LONGEST_PAUSE", "due", "pause_until", "verdict_record"]

FIRST_PAUSE = timedelta(seconds=30)
LONGEST_PAUSE = timedelta(hours=1)


def pause_until(
    failures: int,
    last: datetime,
    *,
    first: timedelta = FIRST_PAUSE,
    longest: timedelta = LONGEST_PAUSE,
) -> datetime:
    """After ``failures`` in a row, the last at ``last``: not before this (doubling)."""
    pause: timedelta = min(longest, first * (2 ** min(failures - 1, 30)))
    return last + pause


def due(view: SentView, settings: Compaction, now: datetime) -> bool:
    if view.chars <= settings.start:
        return False
    rejections = view.rejections
    return not rejections or now >= pause_until(len(rejections), rejections[-1].at)


async def verdict_record(
    summary: Summary, cut: Cut, settings: Compaction, now: datetime
) -> CompactionRecord:
    verdict = await check_summary(summary.text, cut.replaced, cut.replaced_chars, settings.checks)
    if verdict is not None:
        return CompactionRejected(
            first=1,
            through=cut.through,
            reason=verdict.reason,
            detail=verdict.detail,
            provider=summary.provider,
            model=summary.model,
            usage=summary.usage,
            at=now,
        )
    return HistoryCompacted(
        first=1,
        through=cut.through,
        summary=summary.text,
        replaces=cut.replaces,
        provider=summary.provider,
        model=summary.model,
        usage=summary.usage,
        chars_before=cut.chars_before,
        chars_after=cut.chars_before - cut.replaced_chars + len(summary.text),
    )
