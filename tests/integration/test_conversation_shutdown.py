"""The server's shutdown cuts a moderated conversation's run, over the real HTTP server
(``ankka serve``, SIGTERM) with the stand-in as every speaker's model: the run's request, past
the drain's grace, is answered with the ``shutting_down`` error (the stream's last event, or a
503), the run records why it was cut off (``conversation_cut_off``, cause ``shutting_down``),
and the process exits cleanly; the same message sent to the next server goes on with the run
(``conversation_resumed``), its recorded tool call not run again; a different message ends it
``interrupted``, its detail naming the shutdown (docs/teams.md, "A run cut off")."""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.integration import test_conversation_tools as tools
from tests.integration.test_conversation_tools import (
    Setup,
    calls,
    cut_recorded,
    events_of,
    says,
    sent_again,
)
from tests.integration.test_moderation import converse
from tests.support.eventually import eventually
from tests.support.processes import Server

pytestmark = pytest.mark.integration

SLOW = says("never heard", when="tool", delay_ms=30000)  # past the drain's 10 s grace


setup = tools.setup  # the fixture: a store, and the servers started on it, stopped after


def tool_result_recorded(setup: Setup) -> None:
    """Waited for: dee's tool result recorded, her next model call (SLOW) in flight."""
    eventually(
        lambda: any(kind == "tool_result" for kind, _ in setup.records("tooled")),
        timeout=30,
        what="the tool's result recorded",
    )


def stopped_cleanly(server: Server) -> str:
    eventually(lambda: server.process.poll() is not None, what="the process exits")
    log = "".join(server.output)
    assert server.process.returncode == 0, log
    assert "cut POST /v1/conversations/tooled/sessions/s1 after" in log, log
    assert "Traceback" not in log, log
    return log


def test_a_streamed_run_the_shutdown_cuts_records_why_and_the_same_message_goes_on(
    setup: Setup,
) -> None:
    first = setup.serve(setup.standin([calls("note", topic="sqlite"), SLOW]))
    url = f"{first.url}/v1/conversations/tooled/sessions/s1"
    headers = {"accept": "text/event-stream"}
    with httpx.stream("POST", url, json={"message": "Go."}, headers=headers, timeout=60) as got:
        assert got.status_code == 200
        tool_result_recorded(setup)
        first.process.send_signal(signal.SIGTERM)
        events = events_of(got)
    kind, error = events[-1]
    assert kind == "error", events
    assert error["error"]["type"] == "shutting_down", error
    assert "its stream ended with an error event" in stopped_cleanly(first)
    assert cut_recorded(setup, "tooled") == "shutting_down"
    # The next server: the same message goes on with the run, from dee's recorded result.
    server = setup.serve(setup.standin([says("sqlite is one file.", when="tool"), says("ann")]))
    run = converse(server, "tooled")
    assert [(t["speaker"], t["text"]) for t in run["turns"]] == [
        ("dee", "sqlite is one file."),
        ("ann", "ann"),
    ]
    assert setup.ran() == ["note sqlite"]  # the recorded call was not run again
    kinds = [kind for kind, _ in setup.records("tooled")]
    assert kinds.count("user_message") == 1  # the same run, not a second one
    assert kinds[kinds.index("conversation_cut_off") :] == [
        "conversation_cut_off",
        "conversation_resumed",
        "assistant_message",
        "assistant_message",
        "conversation_ended",
    ]


def test_a_run_the_shutdown_cuts_is_answered_503_and_a_different_message_ends_it_naming_that(
    setup: Setup,
) -> None:
    first = setup.serve(setup.standin([calls("note", topic="sqlite"), SLOW]))
    url = f"{first.url}/v1/conversations/tooled/sessions/s1"
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(httpx.post, url, json={"message": "Go."}, timeout=60)
        tool_result_recorded(setup)
        first.process.send_signal(signal.SIGTERM)
        cut: httpx.Response = answer.result()
    assert cut.status_code == 503, cut.text
    assert cut.json()["error"]["type"] == "shutting_down"
    assert "answered 503" in stopped_cleanly(first)
    assert cut_recorded(setup, "tooled") == "shutting_down"
    server = setup.serve(setup.standin([says("dee here"), says("ann here")]))
    assert sent_again(setup, url.replace(first.url, server.url)) == [
        ("interrupted", "the server shut down during this run, and a different message followed"),
        ("max_turns", "2 turns, its max_turns"),
    ]
