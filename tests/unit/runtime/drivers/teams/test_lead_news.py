"""What a lead is told of an item that ended: its id, team, type, outcome and agent."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from ankka.runtime.drivers.teams.lead import NEWS_RESULT, news_line
from ankka.runtime.store.team_statements import Item, ItemBody

AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
ITEM = Item(
    team="desk",
    id="p1:1.0",
    body=ItemBody("summary", "Summarise sqlite."),
    state="completed",
    task="team:desk:p1:1.0",
    claimed_by=("researcher", "team.desk.ab.0"),
    claimed_at=AT,
    claims=1,
    result={"title": "sqlite"},
    reason=None,
    created_by="local",
    created_at=AT,
    updated_at=AT,
)


def test_a_completed_item_is_told_with_its_agent_and_result() -> None:
    assert news_line(ITEM) == (
        "- item 'p1:1.0' of team 'desk' (summary) completed by researcher; "
        'result: {"title": "sqlite"}'
    )


def test_a_failed_item_is_told_with_its_reason() -> None:
    failed = replace(ITEM, state="failed", result=None, reason="nothing known about it")
    assert news_line(failed).endswith("failed by researcher; reason: nothing known about it")


def test_an_item_cancelled_before_any_claim_says_no_member_had_it() -> None:
    cancelled = replace(ITEM, state="cancelled", claimed_by=None, result=None, reason="cancelled")
    assert "cancelled (no member had claimed it); reason: cancelled" in news_line(cancelled)


def test_a_long_result_is_cut() -> None:
    long = replace(ITEM, result={"body": "x" * (2 * NEWS_RESULT)})
    assert len(news_line(long)) < NEWS_RESULT + 100 and news_line(long).endswith("...")
