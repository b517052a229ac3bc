"""Compaction's pure core: the fold for the model, the cut, the checks, the settings."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.compaction import Compaction, SummaryCheck
from ankka.runtime.declare.compaction import from_environment
from ankka.runtime.engine.view import SentView, memory_chars
from ankka.runtime.features.compaction.checks import check_summary, identifiers
from ankka.runtime.features.compaction.cut import choose_cut
from ankka.runtime.features.compaction.decide import due, pause_until, verdict_record
from ankka.runtime.features.compaction.summariser import Summary, summary_request
from ankka.runtime.records.compaction import CompactionRejected, HistoryCompacted
from ankka.runtime.records.fold import fold
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    SummaryMessage,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from ankka.runtime.records.registry import Entry, Record

AT = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def stored(items: Sequence[Record]) -> list[Entry]:
    return [Entry(seq, AT, item) for seq, item in enumerate(items, 1)]


def chat(turns: int, size: int = 40) -> list[Message]:
    messages: list[Message] = []
    for n in range(turns):
        messages += [UserMessage("q" * size, "chat", f"t{n}"), AssistantMessage("a" * size)]
    return messages


def compacted(through: int, summary: str, replaces: int) -> HistoryCompacted:
    return HistoryCompacted(
        first=1,
        through=through,
        summary=summary,
        replaces=replaces,
        provider="s",
        model="m",
        usage=Usage(10, 5),
        chars_before=0,
        chars_after=0,
    )


def test_a_compaction_replaces_what_it_covers_for_the_model_and_keeps_the_full_history() -> None:
    items: list[Message | HistoryCompacted] = [*chat(3), compacted(4, "they talked", 4)]
    items += [UserMessage("later"), AssistantMessage("ok")]
    view = SentView().apply_all(stored(items))
    assert [type(m).__name__ for m in view.messages] == [
        "SummaryMessage",
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]
    assert view.messages[0].content == "they talked"
    assert len(fold(items)) == 8
    assert view.compaction_usage == Usage(10, 5)


def test_a_second_compaction_folds_the_first_summary_in_never_stacks() -> None:
    items: list[Message | HistoryCompacted] = [*chat(4), compacted(4, "first", 4)]
    items.append(compacted(6, "second, with first folded in", 6))
    view = SentView().apply_all(stored(items))
    summaries = [m for m in view.messages if isinstance(m, SummaryMessage)]
    assert [s.content for s in summaries] == ["second, with first folded in"]
    assert len(view.verbatim) == 2


def test_a_late_duplicate_compaction_covering_less_is_ignored() -> None:
    items: list[Message | HistoryCompacted] = [*chat(4), compacted(6, "newer", 6)]
    items.append(compacted(4, "older", 4))
    view = SentView().apply_all(stored(items))
    assert view.summary is not None and view.summary.summary == "newer"


def test_the_cut_keeps_the_last_messages_and_starts_the_rest_at_a_turn() -> None:
    view = SentView().apply_all(stored(chat(6)))
    cut = choose_cut(view, Compaction(limit_chars=400, keep_messages=3))
    assert cut is not None
    # keeping 3 would start the kept part on an answer: the cut moves back to its question
    assert cut.index == 8
    assert isinstance(view.verbatim[cut.index], UserMessage)
    assert cut.through == 8


def test_a_cut_that_would_separate_a_tool_call_from_its_result_moves_to_the_turn_start() -> None:
    call = ToolCall("c1", "lookup", '{"order": "A-1"}')
    messages: list[Message] = [
        *chat(2),
        UserMessage("where is A-1?"),
        AssistantMessage(None, (call,)),
        ToolResult("c1", "lookup", "shipped"),
        AssistantMessage("A-1 has shipped."),
    ]
    view = SentView().apply_all(stored(messages))
    cut = choose_cut(view, Compaction(limit_chars=400, keep_messages=2))
    assert cut is not None and cut.index == 4
    kept = view.verbatim[cut.index :]
    assert isinstance(kept[0], UserMessage)
    assert any(isinstance(m, ToolResult) for m in kept)
    assert any(isinstance(m, AssistantMessage) and m.tool_calls for m in kept)


def test_no_cut_when_only_one_turn_precedes_the_verbatim_part() -> None:
    view = SentView().apply_all(stored(chat(1)))
    assert choose_cut(view, Compaction(limit_chars=400, keep_messages=1)) is None


def test_a_cut_over_an_earlier_summary_replaces_it_too() -> None:
    items: list[Message | HistoryCompacted] = [*chat(2), compacted(4, "first", 4), *chat(4)]
    view = SentView().apply_all(stored(items))
    cut = choose_cut(view, Compaction(limit_chars=400, keep_messages=2))
    assert cut is not None
    assert isinstance(cut.replaced[0], SummaryMessage)
    assert cut.base == 4
    assert cut.replaces == 4 + 6
    request = summary_request(cut.replaced, Compaction(limit_chars=400), replaced_chars=900)
    assert request.tools == () and request.output is None
    assert request.max_output_tokens == 300
    sent = request.messages[0]
    assert isinstance(sent, UserMessage)
    assert "The earlier summary:\nfirst" in sent.content


def test_one_summarisation_reads_at_most_its_share_oldest_turns_first() -> None:
    view = SentView().apply_all(stored(chat(40, size=100)))
    settings = Compaction(limit_chars=100, keep_messages=2)
    cut = choose_cut(view, settings)
    assert cut is not None
    assert cut.replaced_chars <= settings.max_replaced_chars
    assert cut.index < len(view.verbatim) - 2


def test_no_cut_for_too_little_when_the_verbatim_part_alone_is_over_the_start() -> None:
    big_tail = [*chat(1, size=20), *chat(3, size=600)]
    view = SentView().apply_all(stored(big_tail))
    settings = Compaction(limit_chars=4000, keep_messages=6)
    assert view.chars > settings.start
    assert choose_cut(view, settings) is None  # 40 new characters is not worth a call
    view = SentView().apply_all(stored([*chat(5, size=100), *chat(3, size=600)]))
    cut = choose_cut(view, settings)
    assert cut is not None and cut.replaced_chars == 1000


def test_memory_is_due_past_its_start_and_pauses_after_rejections() -> None:
    settings = Compaction(limit_chars=400)
    small = SentView().apply_all(stored(chat(3)))
    assert not due(small, settings, AT)
    rejected = CompactionRejected(
        first=1,
        through=2,
        reason="empty",
        detail="",
        provider="s",
        model="m",
        usage=Usage(),
        at=AT,
    )
    big = SentView().apply_all(stored([*chat(5), rejected]))
    assert big.chars > settings.start
    assert not due(big, settings, AT + timedelta(seconds=29))
    assert due(big, settings, AT + timedelta(seconds=30))
    assert pause_until(3, AT) == AT + timedelta(seconds=120)
    assert pause_until(100, AT) == AT + timedelta(hours=1)


async def test_an_empty_summary_is_rejected() -> None:
    verdict = await check_summary("  ", chat(2), 160, ())
    assert verdict is not None and verdict.reason == "empty"


async def test_a_summary_longer_than_what_it_replaces_is_rejected() -> None:
    verdict = await check_summary("x" * 161, chat(2), 160, ())
    assert verdict is not None and verdict.reason == "longer_than_replaced"


async def test_a_summary_that_drops_an_identifier_the_user_gave_is_rejected() -> None:
    replaced: list[Message] = [
        UserMessage("My order ORD-55123 has not arrived."),
        AssistantMessage(None, (ToolCall("c", "find", '{"customer": "Ada Lovelace"}'),)),
        ToolResult("c", "find", "found"),
        AssistantMessage("Found it."),
    ]
    assert identifiers(replaced) == ["ORD-55123", "Ada Lovelace"]
    verdict = await check_summary("An order is late.", replaced, 500, ())
    assert verdict is not None and verdict.reason == "identifier_missing"
    assert "ORD-55123" in verdict.detail
    kept = await check_summary("Ada lovelace's order ord-55123 is late.", replaced, 500, ())
    assert kept is None


async def test_a_declared_check_can_reject_a_summary() -> None:
    def no_apologies(summary: str, replaced: Sequence[Message]) -> str | None:
        return "it apologises" if "sorry" in summary else None

    check = SummaryCheck("no_apologies", no_apologies)
    verdict = await check_summary("sorry, they talked", chat(2), 160, (check,))
    assert verdict is not None and verdict.reason == "check:no_apologies"


async def test_an_adopted_summary_measures_memory_before_and_after() -> None:
    view = SentView().apply_all(stored(chat(6)))
    settings = Compaction(limit_chars=400, keep_messages=2)
    cut = choose_cut(view, settings)
    assert cut is not None
    record = await verdict_record(Summary("short", "s", "m", Usage(7, 3)), cut, settings, AT)
    assert isinstance(record, HistoryCompacted)
    assert record.chars_before == memory_chars(view.messages)
    view.apply(Entry(view.position + 1, AT, record))
    assert record.chars_after == view.chars < record.chars_before


def test_settings_are_checked_where_they_are_declared() -> None:
    with pytest.raises(ConfigurationError, match="limit_chars"):
        Compaction(limit_chars=10)
    with pytest.raises(ConfigurationError, match="start_chars"):
        Compaction(limit_chars=400, start_chars=500)
    assert Compaction(limit_chars=4000).start == 3000


def test_the_deployment_overrides_the_declared_settings_field_by_field() -> None:
    override = from_environment(
        {"ANKKA_COMPACTION_LIMIT_CHARS": "8000", "ANKKA_COMPACTION_MODEL": "small", "HOME": "/"}
    )
    settings = override.apply(Compaction(limit_chars=4000, keep_messages=4))
    assert settings == Compaction(limit_chars=8000, keep_messages=4, model="small")
    assert from_environment({}).apply(None) is None
    assert override.apply(None) == Compaction(limit_chars=8000, model="small")


def test_an_unknown_or_malformed_compaction_variable_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="ANKKA_COMPACTION_LIMIT is no compaction"):
        from_environment({"ANKKA_COMPACTION_LIMIT": "8000"})
    with pytest.raises(ConfigurationError, match="KEEP_MESSAGES='six'"):
        from_environment({"ANKKA_COMPACTION_KEEP_MESSAGES": "six"})
