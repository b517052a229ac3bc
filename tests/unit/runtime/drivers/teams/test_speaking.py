"""What a speaker of a moderated conversation is shown: pure."""

from __future__ import annotations

from collections.abc import Sequence

from ankka.runtime.declare.teams import Spoken
from ankka.runtime.drivers.teams.speaking import view_for
from ankka.runtime.records.messages import AssistantMessage, UserMessage


def roles(messages: Sequence[object]) -> list[str]:
    return ["assistant" if isinstance(m, AssistantMessage) else "user" for m in messages]


def test_a_speaker_sees_its_own_turns_as_answers_and_the_others_named() -> None:
    transcript = [
        Spoken("user", "Go."),
        Spoken("ann", "ann here"),
        Spoken("bob", "bob here"),
        Spoken("cy", "cy here"),
        Spoken("ann", "ann again"),
    ]
    shown = view_for("bob", transcript, "t1")
    assert roles(shown) == ["user", "assistant", "user"]
    assert isinstance(shown[0], UserMessage) and shown[0].content == "[user] Go.\n\n[ann] ann here"
    assert shown[1].content == "bob here"
    assert shown[2].content == ("[cy] cy here\n\n[ann] ann again\n\nIt is your turn to speak, bob.")


def test_roles_alternate_when_a_speaker_spoke_twice_in_a_row() -> None:
    transcript = [Spoken("user", "Go."), Spoken("ann", "one"), Spoken("ann", "two")]
    shown = view_for("ann", transcript, "t1")
    assert roles(shown) == ["user", "assistant", "user"]
    assert shown[1].content == "one\n\ntwo"
    assert shown[2].content == "It is your turn to speak, ann."
