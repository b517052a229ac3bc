"""Where a conversation's run stood, read from its records: what was said and skipped, the
turn it was in the middle of (its answers asking for tools and their results), and what its
recorded calls spent; another run's records and a run's end are told apart."""

from __future__ import annotations

from datetime import UTC, datetime

from ankka.runtime.declare.teams import Spoken
from ankka.runtime.drivers.teams.runs import recorded_run, spoken
from ankka.runtime.records.accounting import UnwrittenCalls
from ankka.runtime.records.conversations import (
    CALLER_LEFT,
    ConversationCutOff,
    ConversationEnded,
    ConversationResumed,
    TurnSkipped,
)
from ankka.runtime.records.messages import (
    AssistantMessage,
    ModelCall,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from ankka.runtime.records.registry import Entry, Record

RUN = "conv_1"
SPEAKERS = ("ann", "bob")


def call(tokens: int) -> ModelCall:
    return ModelCall("default", "m", "x", 1.0, Usage(tokens, 1))


def entries(*records: Record) -> list[Entry]:
    at = datetime(2026, 12, 4, tzinfo=UTC)
    return [Entry(seq, at, record) for seq, record in enumerate(records, 2)]


def test_a_run_in_the_middle_of_a_speakers_tool_work_is_pending_on_it() -> None:
    asked = AssistantMessage(None, (ToolCall("c1", "note", "{}"),), "bob", RUN, call(5))
    result = ToolResult("c1", "note", "found", False, "bob", RUN)
    run = recorded_run(
        entries(
            AssistantMessage("ann here", (), "ann", RUN, call(10)),
            UnwrittenCalls(RUN, "bob", "speaker_silent", (call(7),)),
            TurnSkipped(RUN, "bob", "speaker_silent", "bob said nothing"),
            UserMessage("another run", "c", "conv_2"),
            AssistantMessage("not this run", (), "ann", "conv_2", call(100)),
            asked,
            result,
        ),
        RUN,
        SPEAKERS,
    )
    assert run.said == (Spoken("ann", "ann here"),)
    assert [s.speaker for s in run.skipped] == ["bob"]
    assert run.turns == 2
    assert run.last == "bob"
    assert run.pending == (asked, result)
    assert run.pending_speaker == "bob"
    assert run.usage == Usage(22, 3)
    assert not run.ended


def test_a_spoken_answer_closes_its_speakers_tool_work_and_an_end_ends_the_run() -> None:
    asked = AssistantMessage(None, (ToolCall("c1", "note", "{}"),), "ann", RUN, call(5))
    run = recorded_run(
        entries(
            asked,
            ToolResult("c1", "note", "found", False, "ann", RUN),
            AssistantMessage("ann here", (), "ann", RUN, call(5)),
            ConversationEnded(RUN, "max_turns", "1 turns"),
        ),
        RUN,
        SPEAKERS,
    )
    assert run.said == (Spoken("ann", "ann here"),)
    assert run.pending == ()
    assert run.pending_speaker is None
    assert run.ended
    assert not spoken(asked)
    assert spoken(UserMessage("hi", "c", RUN))


def test_a_skip_recorded_last_is_the_runs_closing_until_anything_of_the_run_follows_it() -> None:
    skip = TurnSkipped(RUN, "bob", "speaker_silent", "bob answered with nothing")
    last = recorded_run(
        entries(AssistantMessage("ann here", (), "ann", RUN, call(1)), skip), RUN, SPEAKERS
    )
    assert last.closing == skip
    followed = recorded_run(
        entries(skip, UnwrittenCalls(RUN, "c.moderator", "moderator", (call(1),))),
        RUN,
        SPEAKERS,
    )
    assert followed.closing is None
    other_run = recorded_run(
        entries(skip, AssistantMessage("x", (), "ann", "conv_2", call(1))), RUN, SPEAKERS
    )
    assert other_run.closing == skip


def test_a_recorded_cut_says_why_the_run_stopped_until_anything_of_the_run_follows_it() -> None:
    said = AssistantMessage("ann here", (), "ann", RUN, call(1))
    cut = ConversationCutOff(RUN, CALLER_LEFT)
    assert recorded_run(entries(said, cut), RUN, SPEAKERS).cut_by == CALLER_LEFT
    # Gone on with, then stopped again with nothing recorded of why: not that cut's cause.
    resumed = recorded_run(entries(said, cut, ConversationResumed(RUN)), RUN, SPEAKERS)
    assert resumed.cut_by is None
    assert recorded_run(entries(cut, said), RUN, SPEAKERS).cut_by is None
    assert recorded_run(entries(said), RUN, SPEAKERS).cut_by is None
    other_run = recorded_run(entries(cut, ConversationResumed("conv_2")), RUN, SPEAKERS)
    assert other_run.cut_by == CALLER_LEFT


def test_a_cut_and_its_resumption_leave_a_closing_skip_the_runs_closing() -> None:
    skip = TurnSkipped(RUN, "bob", "speaker_failed", "bob's turn failed")
    run = recorded_run(
        entries(skip, ConversationCutOff(RUN, CALLER_LEFT), ConversationResumed(RUN)),
        RUN,
        SPEAKERS,
    )
    assert run.closing == skip
