"""Moderated conversations over the real HTTP server, the stand-in as every speaker's model:
a silent speaker (nothing said, or nothing within its turn's deadline), a crashing speaker
(its model refuses the request), a moderator naming an agent not in the conversation, a
function and a model as moderators, and the conversation's own deadline. Each ends, or goes
on, by its policy, with the reason in the answer and in the journal, and never hangs."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script, model_env
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

TARGET = "tests.integration.conversation_services:service"


def says(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "when": "user",
        "text": text,
        "usage": {"input_tokens": 10, "output_tokens": 3},
        **extra,
    }


@pytest.fixture
def server_for(
    standin: Callable[[Script], Server], tmp_path: Path
) -> Iterator[Callable[[Script], Server]]:
    started: list[Server] = []

    def make(script: Script) -> Server:
        model = standin(script)
        store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
        command = ankka_command("serve", TARGET, "--port", "0", "--store", store)
        server = start(command, env=model_env(model.url))
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


def converse(server: Server, conversation: str, session: str = "s1") -> dict[str, Any]:
    answer = httpx.post(
        f"{server.url}/v1/conversations/{conversation}/sessions/{session}",
        json={"message": "Go."},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    run: dict[str, Any] = answer.json()
    return run


def messages(server: Server, conversation: str, session: str = "s1") -> list[tuple[str, Any]]:
    """The conversation's messages, as the session route reads them: (role, agent)."""
    url = f"{server.url}/v1/sessions/conversation:{conversation}:{session}/messages"
    answer = httpx.get(url, timeout=30)
    assert answer.status_code == 200, answer.text
    return [(m["role"], m.get("agent")) for m in answer.json()["messages"]]


def journal(store: Path, conversation: str, session: str = "s1") -> list[tuple[str, Any]]:
    """Straight from the store: the session's records beyond its messages (skips, the end)."""
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT kind, body FROM events WHERE session = ? ORDER BY seq",
            (f"conversation:{conversation}:{session}",),
        ).fetchall()
    kept = ("turn_skipped", "conversation_ended")
    return [(kind, json.loads(body)["reason"]) for kind, body in rows if kind in kept]


def speakers(run: dict[str, Any]) -> list[str]:
    return [t["speaker"] for t in run["turns"]]


def test_a_speaker_that_says_nothing_is_skipped_and_the_next_one_speaks(
    server_for: Callable[[Script], Server], tmp_path: Path
) -> None:
    server = server_for([says("ann here"), says(""), says("cy here")])
    run = converse(server, "skipping")
    assert speakers(run) == ["ann", "cy"]
    assert [(s["speaker"], s["reason"]) for s in run["skipped"]] == [("bob", "speaker_silent")]
    assert run["ended"]["reason"] == "max_turns"
    assert messages(server, "skipping") == [
        ("user", "skipping"),
        ("assistant", "ann"),
        ("assistant", "cy"),
    ]
    assert journal(tmp_path / "store.sqlite3", "skipping") == [
        ("turn_skipped", "speaker_silent"),
        ("conversation_ended", "max_turns"),
    ]


def test_a_speaker_silent_past_its_turns_deadline_is_skipped_within_it(
    server_for: Callable[[Script], Server],
) -> None:
    server = server_for([says("ann here"), says("too late", delay_ms=30_000), says("cy here")])
    run = converse(server, "skipping")
    assert speakers(run) == ["ann", "cy"]
    skipped = run["skipped"]
    assert [(s["speaker"], s["reason"]) for s in skipped] == [("bob", "speaker_silent")]
    assert "within 8 s" in skipped[0]["detail"]


def test_a_silent_speaker_ends_a_strict_conversation_saying_so(
    server_for: Callable[[Script], Server],
) -> None:
    server = server_for([says("ann here"), says("too late", delay_ms=30_000)])
    run = converse(server, "strict")
    assert speakers(run) == ["ann"]
    assert run["ended"]["reason"] == "speaker_silent"
    assert "bob" in run["ended"]["detail"]


def test_a_crashing_speaker_is_skipped_or_ends_the_conversation_by_policy(
    server_for: Callable[[Script], Server], tmp_path: Path
) -> None:
    refused = {"when": "user", "status": 400, "text": "the request is refused"}
    server = server_for([says("ann here"), refused, says("cy here"), says("ann again"), refused])
    run = converse(server, "skipping")
    assert speakers(run) == ["ann", "cy"]
    assert [(s["speaker"], s["reason"]) for s in run["skipped"]] == [("bob", "speaker_failed")]
    strict = converse(server, "strict")
    assert speakers(strict) == ["ann"]
    assert strict["ended"]["reason"] == "speaker_failed"
    assert "bob's turn failed" in strict["ended"]["detail"]
    assert journal(tmp_path / "store.sqlite3", "strict") == [
        ("turn_skipped", "speaker_failed"),
        ("conversation_ended", "speaker_failed"),
    ]


def test_a_moderator_naming_an_agent_not_in_the_conversation_ends_it_or_is_skipped(
    server_for: Callable[[Script], Server],
) -> None:
    server = server_for([says("ann here"), says("ann again"), says("bob here"), says("cy here")])
    run = converse(server, "stranger")
    assert speakers(run) == ["ann"]
    assert run["ended"]["reason"] == "unknown_speaker"
    assert "mallory" in run["ended"]["detail"]
    skipped = converse(server, "stranger-skipped")
    # The stranger's turn is skipped; with max_turns 3: ann, (mallory), then ann again.
    assert [(s["speaker"], s["reason"]) for s in skipped["skipped"]] == [
        ("mallory", "unknown_speaker"),
        ("mallory", "unknown_speaker"),
    ]
    assert speakers(skipped) == ["ann"]
    assert skipped["ended"]["reason"] == "max_turns"


def test_a_function_moderator_ends_the_conversation_when_it_chooses(
    server_for: Callable[[Script], Server],
) -> None:
    server = server_for([says("ann here")])
    run = converse(server, "chosen")
    assert speakers(run) == ["ann"]
    assert run["ended"] == {"reason": "moderator", "detail": "the moderator ended it"}


def test_a_model_moderator_chooses_the_speakers_and_ends_with_end(
    server_for: Callable[[Script], Server],
) -> None:
    # The selector's calls and the speakers' share the script, in the order they are made.
    server = server_for([says("cy"), says("cy here"), says("bob"), says("bob here"), says("END")])
    run = converse(server, "selected")
    assert speakers(run) == ["cy", "bob"]
    assert run["ended"]["reason"] == "moderator"
    assert run["usage"]["input_tokens"] == 50  # the moderator's calls count too


def test_the_conversations_deadline_ends_it_while_speakers_stay_silent(
    server_for: Callable[[Script], Server],
) -> None:
    late = [says("late", delay_ms=8000) for _ in range(4)]
    server = server_for(late)
    run = converse(server, "short")
    assert run["turns"] == []
    assert run["ended"]["reason"] == "deadline_exceeded"
    assert len(run["skipped"]) <= 2  # two turns of 2 s fit in its 3 s
