"""What an agent is told of a team message: its kind, sender, team, id and text; and what the
message tool's input refuses, naming the bound."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from ankka.runtime.drivers.teams.messages import SendInput, message_line
from ankka.runtime.store.team_message_statements import MAX_TEXT, Message, MessageBody

AT = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def message(body: MessageBody) -> Message:
    return Message(team="desk", id="t:1.0", seq=1, body=body, created_by="local", created_at=AT)


def test_a_message_from_an_agent_names_its_kind_sender_team_and_id() -> None:
    sent = message(MessageBody("writer", "team:desk:d1", "planner", "question", "Which one?"))
    assert message_line(sent) == (
        "- [question] from writer (team 'desk', message 't:1.0'): Which one?"
    )


def test_a_message_to_everyone_over_http_names_the_caller() -> None:
    sent = message(MessageBody("alice", None, "everyone", "blocker", "The build is red."))
    assert message_line(sent) == (
        "- [blocker] from caller 'alice' to everyone (team 'desk', message 't:1.0'): "
        "The build is red."
    )


def test_the_tools_input_refuses_an_unknown_kind_and_a_long_text() -> None:
    with pytest.raises(ValidationError, match="'note', 'question', 'answer' or 'blocker'"):
        SendInput.model_validate({"to": "lead", "kind": "gossip", "text": "Hi."})
    with pytest.raises(ValidationError, match=f"at most {MAX_TEXT} characters"):
        SendInput.model_validate({"to": "lead", "kind": "note", "text": "x" * (MAX_TEXT + 1)})
