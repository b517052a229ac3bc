"""The script both test doubles answer from, and the stand-in's choice of turn."""

from __future__ import annotations

import pytest

from ankka._kernel.errors import ConfigurationError
from ankka.local.standin.server import StandinState
from ankka.runtime.providers.script import TurnQueue, parse_script


@pytest.mark.parametrize(
    ("script", "words"),
    [
        ({"turn": []}, "unknown top-level key(s) ['turn']"),
        ([{"txt": "hi"}], "turn 0: unknown key(s) ['txt']"),
        ([{"text": "a"}, {}], "turn 1: needs 'text', 'tool_calls' or 'status'"),
        ([{"tool_calls": [{"arguments": {}}]}], "turn 0, tool call 0: each tool call needs"),
        ([{"text": "a", "usage": {"input_tokens": -1}}], "usage 'input_tokens' must be"),
        ([{"text": "a", "when": "assistant"}], "'when' must be one of"),
        ({"models": {"m": {"capabilities": "tools"}}}, "'capabilities' must be a list"),
    ],
)
def test_a_mistake_in_a_script_names_the_turn_and_the_key(script: object, words: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_script(script)
    assert words in str(error.value)


def test_arguments_given_as_a_string_are_sent_verbatim() -> None:
    turn = parse_script([{"tool_calls": [{"name": "f", "arguments": "{broken"}]}]).turns[0]
    assert turn.tool_calls[0].arguments == "{broken"


def test_turns_are_served_in_order_then_none() -> None:
    state = StandinState(TurnQueue(parse_script(["a", "b"]).turns))
    assert [state.take(None)[1].text for _ in range(2)] == ["a", "b"]  # type: ignore[union-attr]
    assert state.take(None) == (3, None)


def test_a_conditional_turn_answers_only_the_role_it_names() -> None:
    script = [
        {"tool_calls": [{"name": "f"}], "when": "user"},
        {"text": "done", "when": "tool"},
        {"tool_calls": [{"name": "f"}], "when": "user"},
        {"text": "done", "when": "tool"},
    ]
    state = StandinState(TurnQueue(parse_script(script).turns))
    first, second = state.take("user")[1], state.take("user")[1]
    assert first is not None and second is not None
    assert first.tool_calls and second.tool_calls
    assert state.take("user")[1] is None  # no call left for a user message
    assert [state.take("tool")[1].text for _ in range(2)] == ["done", "done"]  # type: ignore[union-attr]


def test_a_turn_can_answer_only_the_nth_call_of_a_conversation() -> None:
    from ankka.local.standin.server import _call_number
    from ankka.runtime.providers.script import ScriptError, parse_turns

    turns = parse_turns([{"text": "third", "call": 3}, {"text": "first", "call": 1}])
    state = StandinState(TurnQueue(turns))
    first = {"messages": [{"role": "user", "content": "q"}]}
    third = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "tool", "content": "r"},
        ]
    }
    assert _call_number("chat", first) == 1 and _call_number("chat", third) == 3
    assert state.take("user", 1)[1] == turns[1]
    assert state.take("tool", 3)[1] == turns[0]
    with pytest.raises(ScriptError, match="'call' must be a whole number"):
        parse_turns([{"text": "x", "call": 0}])


def test_a_turn_can_answer_only_a_request_containing_its_text() -> None:
    from ankka.local.standin.server import _text
    from ankka.runtime.providers.script import ScriptError, parse_turns

    turns = parse_turns(
        [{"text": "for b", "contains": "Task b (type"}, {"text": "for a", "contains": "Task a"}]
    )
    state = StandinState(TurnQueue(turns))
    chat = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "Task a"}]}
    anthropic = {
        "system": "s",
        "messages": [{"role": "user", "content": [{"text": "Task b (type"}]}],
    }
    assert state.take("user", 1, _text(chat))[1] == turns[1]  # the first turn does not fit it
    assert state.take("user", 1, _text(chat))[1] is None  # nor does anything left
    assert state.take("user", 1, _text(anthropic))[1] == turns[0]
    assert "Task b (type" not in _text({"model": "Task b (type", "messages": []})
    with pytest.raises(ScriptError, match="'contains' must be a non-empty string"):
        parse_turns([{"text": "x", "contains": ""}])
