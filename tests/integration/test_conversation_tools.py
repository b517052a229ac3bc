"""A conversation's speakers use their agents' tools, and a run is streamed, over the real
HTTP server (``ankka serve``) with the stand-in as every speaker's model: a speaker's tool
call and its result are journaled and sent to its model's next request; a call needing a
person's approval is refused, saying why; a speaker past its tool rounds fails its turn,
naming the bound; a run cut off by a SIGKILL goes on when the message is sent again, its
recorded call not made again; the SSE answer sends each turn as recorded and the end, and the
JSON answer keeps its shape; a run its stream's caller left, or that outlived its stream's
deadline, records why it was cut off, and a different message ends it naming that."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script, model_env
from tests.integration.tasks_crash import model_requests
from tests.integration.test_moderation import converse
from tests.support.eventually import eventually
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

TARGET = "tests.integration.conversation_services:service"
USAGE = {"input_tokens": 10, "output_tokens": 3}


def says(text: str, when: str = "user", **extra: Any) -> dict[str, Any]:
    return {"when": when, "text": text, "usage": USAGE, **extra}


def calls(name: str, when: str = "user", **arguments: Any) -> dict[str, Any]:
    return {
        "when": when,
        "tool_calls": [{"name": name, "arguments": arguments}],
        "usage": USAGE,
    }


class Setup:
    def __init__(self, standin: Callable[[Script], Server], tmp_path: Path) -> None:
        self.standin, self.tmp_path = standin, tmp_path
        self.store = tmp_path / "store.sqlite3"
        self.log = tmp_path / "tools.log"
        self.started: list[Server] = []

    def serve(self, model: Server, env: dict[str, str] | None = None) -> Server:
        command = ankka_command(
            "serve", TARGET, "--port", "0", "--store", f"sqlite:///{self.store}"
        )
        env = {**model_env(model.url), "ANKKA_TEST_TOOL_LOG": str(self.log), **(env or {})}
        server = start(command, env=env)
        self.started.append(server)
        return server

    def ran(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def records(self, conversation: str, session: str = "s1") -> list[tuple[str, Any]]:
        with sqlite3.connect(self.store) as db:
            rows = db.execute(
                "SELECT kind, body FROM events WHERE session = ? ORDER BY seq",
                (f"conversation:{conversation}:{session}",),
            ).fetchall()
        return [(kind, json.loads(body)) for kind, body in rows]


@pytest.fixture
def setup(standin: Callable[[Script], Server], tmp_path: Path) -> Iterator[Setup]:
    made = Setup(standin, tmp_path)
    yield made
    for server in made.started:
        server.stop()


def events_of(answer: httpx.Response) -> list[tuple[str, Any]]:
    """A stream's server-sent events, read to its end: (event, data); a comment is ("#", text)."""
    seen: list[tuple[str, Any]] = []
    event = ""
    for line in answer.iter_lines():
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            seen.append((event, json.loads(line.removeprefix("data: "))))
        elif line.startswith(":"):
            seen.append(("#", line.removeprefix(":").strip()))
    return seen


def streamed(server: Server, conversation: str, session: str) -> list[tuple[str, Any]]:
    """The run's server-sent events, in order."""
    url = f"{server.url}/v1/conversations/{conversation}/sessions/{session}"
    headers = {"accept": "text/event-stream"}
    with httpx.stream("POST", url, json={"message": "Go."}, headers=headers, timeout=90) as got:
        assert got.status_code == 200, got.read()
        assert got.headers["content-type"].startswith("text/event-stream")
        return events_of(got)


def cut_off(setup: Setup, server: Server | None, url: str) -> None:
    """Start the run (streamed: its answer begins once it has), and once the speaker's tool
    result is recorded, while its next model call is in flight, SIGKILL ``server`` (None:
    the caller leaves the stream)."""
    headers = {"accept": "text/event-stream"}
    with httpx.stream("POST", url, json={"message": "Go."}, headers=headers, timeout=60) as got:
        assert got.status_code == 200
        eventually(
            lambda: any(kind == "tool_result" for kind, _ in setup.records("tooled")),
            timeout=30,
            what="the tool's result recorded",
        )
        if server is not None:
            server.process.kill()
            server.process.wait()


def sent_again(setup: Setup, url: str) -> list[tuple[str, str]]:
    """A different message to the session (dee and ann speak); the session's ends."""
    answer = httpx.post(url, json={"message": "Again."}, timeout=60)
    assert answer.status_code == 200, answer.text
    assert [t["speaker"] for t in answer.json()["turns"]] == ["dee", "ann"]
    return [
        (body["reason"], body["detail"])
        for kind, body in setup.records("tooled")
        if kind == "conversation_ended"
    ]


def cut_recorded(setup: Setup, conversation: str) -> str:
    """The cause of the ``conversation_cut_off`` the run of the message "Go." records last, as
    it stops (waited for)."""

    def cut() -> list[Any]:
        records = setup.records(conversation)
        assert records[-1][0] == "conversation_cut_off", records
        return [body for _, body in records]

    recorded = eventually(cut, timeout=30, what="the run's cut-off recorded")
    message = next(body for body in recorded if body.get("content") == "Go.")
    assert set(recorded[-1]) == {"turn", "cause"}
    assert recorded[-1]["turn"] == message["turn"]
    return str(recorded[-1]["cause"])


def test_a_speakers_tool_result_is_journaled_and_sent_to_its_next_model_request(
    setup: Setup,
) -> None:
    model = setup.standin(
        [calls("note", topic="sqlite"), says("sqlite is one file.", when="tool"), says("ann here")]
    )
    server = setup.serve(model)
    run = converse(server, "tooled")
    assert [(t["speaker"], t["text"]) for t in run["turns"]] == [
        ("dee", "sqlite is one file."),
        ("ann", "ann here"),
    ]
    assert run["ended"]["reason"] == "max_turns"
    assert setup.ran() == ["note sqlite"]
    kinds = [(kind, body.get("agent")) for kind, body in setup.records("tooled")]
    assert [k for k in kinds if k[0] in ("assistant_message", "tool_result")] == [
        ("assistant_message", "dee"),
        ("tool_result", "dee"),
        ("assistant_message", "dee"),
        ("assistant_message", "ann"),
    ]
    result = next(body for kind, body in setup.records("tooled") if kind == "tool_result")
    assert result["content"] == "sqlite: an embedded SQL database in one file"
    requests = model_requests(model)
    assert [t["function"]["name"] for t in requests[0]["body"]["tools"]] == ["note", "publish"]
    last = requests[1]["body"]["messages"][-1]
    assert last["role"] == "tool"
    assert last["content"] == "sqlite: an embedded SQL database in one file"
    # Ann is shown what dee said, not dee's tool work.
    shown = json.dumps(requests[2]["body"]["messages"])
    assert "[dee] sqlite is one file." in shown
    assert "an embedded SQL database" not in shown
    messages = httpx.get(
        f"{server.url}/v1/sessions/conversation:tooled:s1/messages", timeout=30
    ).json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "assistant"]


def test_a_call_needing_approval_is_refused_saying_why_and_the_turn_goes_on(
    setup: Setup,
) -> None:
    model = setup.standin(
        [calls("publish", text="hello"), says("I could not publish.", when="tool"), says("ok")]
    )
    server = setup.serve(model)
    run = converse(server, "tooled")
    assert [t["speaker"] for t in run["turns"]] == ["dee", "ann"]
    assert setup.ran() == []  # never run
    result = next(body for kind, body in setup.records("tooled") if kind == "tool_result")
    assert result["is_error"] is True
    assert "needs a person's approval" in result["content"]
    assert (
        "needs a person's approval" in model_requests(model)[1]["body"]["messages"][-1]["content"]
    )


def test_a_speaker_past_its_tool_rounds_fails_its_turn_naming_the_bound(setup: Setup) -> None:
    again = calls("note", when="tool", topic="sqlite")
    model = setup.standin([calls("note", topic="sqlite"), again, again, says("ann here")])
    server = setup.serve(model)
    run = converse(server, "tooled")
    assert [t["speaker"] for t in run["turns"]] == ["ann"]
    [skipped] = run["skipped"]
    assert (skipped["speaker"], skipped["reason"]) == ("dee", "speaker_failed")
    assert "after 2 tool rounds" in skipped["detail"]
    assert "max_tool_rounds" in skipped["detail"]
    assert setup.ran() == ["note sqlite", "note sqlite"]  # two rounds ran, the third did not
    ended = [body for kind, body in setup.records("tooled") if kind == "turn_skipped"]
    assert "max_tool_rounds" in ended[0]["detail"]


def test_a_run_cut_off_goes_on_when_its_message_is_sent_again_without_calling_again(
    setup: Setup,
) -> None:
    slow = says("never heard", when="tool", delay_ms=20000)
    first_model = setup.standin([calls("note", topic="sqlite"), slow])
    first = setup.serve(first_model)
    url = f"{first.url}/v1/conversations/tooled/sessions/s1"
    cut_off(setup, first, url)
    model = setup.standin([says("sqlite is one file.", when="tool"), says("ann here")])
    server = setup.serve(model)
    run = converse(server, "tooled")
    assert [(t["speaker"], t["text"]) for t in run["turns"]] == [
        ("dee", "sqlite is one file."),
        ("ann", "ann here"),
    ]
    assert run["ended"]["reason"] == "max_turns"
    assert setup.ran() == ["note sqlite"]  # the recorded call was not run again
    asked = model_requests(model)
    assert asked[0]["body"]["messages"][-1]["role"] == "tool"  # gone on from the result
    kinds = [kind for kind, _ in setup.records("tooled")]
    assert kinds.count("user_message") == 1  # the same run, not a second one
    assert kinds.count("tool_result") == 1
    assert kinds.count("conversation_ended") == 1


def test_a_different_message_after_a_run_cut_off_ends_it_as_interrupted(setup: Setup) -> None:
    model = setup.standin([calls("note", topic="sqlite"), says("x", when="tool", delay_ms=20000)])
    first = setup.serve(model)
    url = f"{first.url}/v1/conversations/tooled/sessions/s1"
    cut_off(setup, first, url)
    server = setup.serve(setup.standin([says("dee here"), says("ann here")]))
    ends = sent_again(setup, url.replace(first.url, server.url))
    # A killed process recorded nothing of why: the default wording.
    assert ends == [
        ("interrupted", "the runtime stopped during this run, and a different message followed"),
        ("max_turns", "2 turns, its max_turns"),
    ]


def test_the_stream_sends_each_turn_as_recorded_then_the_end_and_json_keeps_its_shape(
    setup: Setup,
) -> None:
    turns = [says("ann here"), says(""), says("cy here")]
    server = setup.serve(setup.standin([*turns, *turns]))
    events = [e for e in streamed(server, "skipping", "streamed") if e[0] != "#"]
    assert [e for e, _ in events] == ["turn", "skipped", "turn", "ended"]
    assert events[0][1] == {"speaker": "ann", "text": "ann here"}
    assert events[1][1]["speaker"] == "bob"
    assert events[1][1]["reason"] == "speaker_silent"
    assert events[2][1] == {"speaker": "cy", "text": "cy here"}
    assert events[3][1]["reason"] == "max_turns"
    assert events[3][1]["detail"] == "3 turns, its max_turns"
    run = converse(server, "skipping", "plain")
    assert set(run) == {"conversation", "session", "turns", "skipped", "ended", "usage"}
    assert run["turns"] == [events[0][1], events[2][1]]
    assert run["ended"] == {"reason": "max_turns", "detail": "3 turns, its max_turns"}
    # What the stream sent is what the session recorded.
    recorded = [
        (body.get("agent"), body.get("content"))
        for kind, body in setup.records("skipping", "streamed")
        if kind == "assistant_message"
    ]
    assert recorded == [("ann", "ann here"), ("cy", "cy here")]


def test_a_stream_of_a_conversation_not_declared_is_a_json_404(setup: Setup) -> None:
    server = setup.serve(setup.standin([]))
    answer = httpx.post(
        f"{server.url}/v1/conversations/nope/sessions/s1",
        json={"message": "Go."},
        headers={"accept": "text/event-stream"},
        timeout=30,
    )
    assert answer.status_code == 404
    assert answer.json()["error"]["type"] == "not_found"


def test_the_stream_keeps_alive_while_a_turn_takes_longer_than_its_keep_alive(
    setup: Setup,
) -> None:
    slow = says("dee here, slowly", delay_ms=17000)  # past the 15 s keep-alive
    server = setup.serve(setup.standin([slow, says("ann here")]))
    events = streamed(server, "tooled", "slow")
    assert events[0] == ("#", "keep-alive")
    assert [e for e, _ in events[1:]] == ["turn", "turn", "ended"]


def test_a_stream_left_by_its_caller_stops_the_run_and_the_same_message_goes_on_with_it(
    setup: Setup,
) -> None:
    slow = says("never heard", when="tool", delay_ms=20000)
    model = setup.standin(
        [calls("note", topic="sqlite"), slow, says("sqlite is one file.", when="tool"),
         says("ann here")]
    )  # fmt: skip
    server = setup.serve(model)
    url = f"{server.url}/v1/conversations/tooled/sessions/s1"
    cut_off(setup, None, url)
    # The caller left while dee's next model call was in flight: sent again, the run goes on.
    run = converse(server, "tooled")
    assert [(t["speaker"], t["text"]) for t in run["turns"]] == [
        ("dee", "sqlite is one file."),
        ("ann", "ann here"),
    ]
    assert setup.ran() == ["note sqlite"]
    kinds = [kind for kind, _ in setup.records("tooled")]
    assert kinds.count("user_message") == 1
    assert kinds.count("conversation_ended") == 1


def test_a_run_cut_off_after_a_skip_that_ended_it_ends_so_when_its_message_is_sent_again(
    setup: Setup,
) -> None:
    first = setup.serve(setup.standin([says("ann here"), says("")]))
    run = converse(first, "strict")
    assert run["ended"]["reason"] == "speaker_silent"
    first.stop()
    # The runtime stopped after bob's skip was recorded, before the end it made was: the
    # state a SIGKILL between those two appends leaves.
    with sqlite3.connect(setup.store) as db:
        db.execute(
            "DELETE FROM events WHERE session = ? AND kind = 'conversation_ended'",
            ("conversation:strict:s1",),
        )
    model = setup.standin([says("cy here")])
    again = converse(setup.serve(model), "strict")
    assert again["ended"]["reason"] == "speaker_silent"  # as the policy said, not a new turn
    assert again["ended"]["detail"] == run["ended"]["detail"]
    assert [t["speaker"] for t in again["turns"]] == ["ann"]
    assert model_requests(model) == []
    kinds = [kind for kind, _ in setup.records("strict")]
    assert kinds.count("conversation_ended") == 1


def test_a_skipped_speakers_spent_calls_and_its_skip_are_recorded_in_one_append(
    setup: Setup,
) -> None:
    # Apart, a run cut off between them would be gone on with by asking bob again: his
    # recorded (unwritten) call made again.
    server = setup.serve(setup.standin([says("ann here"), says(""), says("cy here")]))
    run = converse(server, "skipping")
    assert [s["speaker"] for s in run["skipped"]] == ["bob"]
    with sqlite3.connect(setup.store) as db:
        rows = db.execute(
            "SELECT seq, kind, at FROM events WHERE session = ? ORDER BY seq",
            ("conversation:skipping:s1",),
        ).fetchall()
    [(spent_seq, spent_at)] = [(seq, at) for seq, kind, at in rows if kind == "unwritten_calls"]
    [(skip_seq, skip_at)] = [(seq, at) for seq, kind, at in rows if kind == "turn_skipped"]
    assert (skip_seq, skip_at) == (spent_seq + 1, spent_at)  # one append: one time


def test_a_different_message_after_a_stream_its_caller_left_ends_it_naming_the_caller_leaving(
    setup: Setup,
) -> None:
    slow = says("never heard", when="tool", delay_ms=20000)
    model = setup.standin([calls("note", topic="sqlite"), slow, says("dee here"), says("ann here")])
    server = setup.serve(model)
    url = f"{server.url}/v1/conversations/tooled/sessions/s1"
    cut_off(setup, None, url)
    # The caller left mid-turn (dee's next model call in flight): the run records why it stopped.
    assert cut_recorded(setup, "tooled") == "caller_left"
    assert sent_again(setup, url) == [
        (
            "interrupted",
            "its stream's caller left during this run, and a different message followed",
        ),
        ("max_turns", "2 turns, its max_turns"),
    ]


def test_a_run_outliving_its_streams_deadline_is_cut_recording_why_and_ends_naming_it(
    setup: Setup,
) -> None:
    # Eve's tool does not stop at her turn's deadline (2 s): the run outlives the stream's
    # bound (its deadline and 15 s more), and the stream, ending, cuts it.
    model = setup.standin([calls("linger", seconds=60), says("eve here")])
    server = setup.serve(model)
    events = streamed(server, "lingering", "s1")
    assert setup.ran() == ["linger told to stop"]  # its turn's deadline came first
    kind, error = events[-1]
    assert kind == "error", events
    assert error["error"]["type"] == "stream_deadline_exceeded", error
    assert "deadline of 2 s (and 15 s more)" in error["error"]["message"], error
    assert cut_recorded(setup, "lingering") == "stream_deadline_exceeded"
    url = f"{server.url}/v1/conversations/lingering/sessions/s1"
    answer = httpx.post(url, json={"message": "Again."}, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json()["turns"] == [{"speaker": "eve", "text": "eve here"}]
    ends = [
        (body["reason"], body["detail"])
        for kind, body in setup.records("lingering")
        if kind == "conversation_ended"
    ]
    assert ends == [
        (
            "interrupted",
            "its stream's deadline passed during this run, and a different message followed",
        ),
        ("max_turns", "1 turns, its max_turns"),
    ]
