"""A moderated conversation's section of the console: every record of a run is shown, each
marked with its kind, in the order written; a cut names its cause as a person reads it."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from ankka.runtime.records import conversations
from ankka.runtime.records.conversations import (
    ConversationCutOff,
    ConversationEnded,
    ConversationResumed,
    TurnSkipped,
)
from ankka.runtime.records.messages import AssistantMessage, ToolCall, UserMessage
from ankka.runtime.records.registry import Entry, Record
from ankka.runtime.serve.console.teams_pages import conversation_section

AT = datetime(2026, 12, 4, 5, 0, tzinfo=UTC)

# One record of each kind a run holds besides its speakers' tool work (keyed by type: a kind
# added to the conversation's records and not given here fails the test below).
SAMPLES: dict[type, Record] = {
    TurnSkipped: TurnSkipped("t1", "bob", "speaker_silent", "bob said nothing within 2 s"),
    ConversationCutOff: ConversationCutOff("t1", "caller_left"),
    ConversationResumed: ConversationResumed("t1"),
    ConversationEnded: ConversationEnded("t1", "max_turns", "3 turns, its max_turns"),
}


def _section(records: list[Record]) -> str:
    return conversation_section([Entry(n, AT, r) for n, r in enumerate(records, 1)])


def test_every_kind_of_a_runs_record_is_shown_marked_with_its_kind_in_order() -> None:
    kinds = [
        getattr(conversations, name)
        for name in conversations.__all__
        if isinstance(getattr(conversations, name), type)
    ]
    records: list[Record] = [
        UserMessage("Go.", "standup", "t1"),
        AssistantMessage(None, (ToolCall("c1", "note", "{}"),), "ann", "t1"),
        AssistantMessage("ann here", (), "ann", "t1"),
        SAMPLES[TurnSkipped],
        SAMPLES[ConversationCutOff],
        SAMPLES[ConversationResumed],
        AssistantMessage("cy here", (), "cy", "t1"),
        SAMPLES[ConversationEnded],
    ]
    assert {type(r) for r in records} >= {*kinds, UserMessage, AssistantMessage}, SAMPLES
    shown = re.findall(r'data-record="(\w+)"', _section(records))
    assert shown == [r.kind for r in records]


def test_a_cut_names_its_cause_and_a_run_cut_off_has_no_end_yet() -> None:
    for cause, said in (
        ("caller_left", "its stream&#x27;s caller left"),
        ("stream_deadline_exceeded", "its stream&#x27;s deadline passed"),
        ("shutting_down", "the server shut down"),
    ):
        html = _section([UserMessage("Go.", "standup", "t1"), ConversationCutOff("t1", cause)])
        assert f'data-cause="{cause}"' in html
        assert f"Cut off</strong>: {said}" in html
        assert "Not ended yet." in html
