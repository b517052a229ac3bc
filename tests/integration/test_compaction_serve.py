"""Compaction over ``ankka serve`` and the stand-in: long sessions stay under the limit.

The agent and the summariser are given separate stand-ins (``ANKKA_COMPACTION_MODEL``
names a second model), so each one's log holds only its own requests and neither can take
the other's scripted answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script, received
from tests.support.eventually import eventually
from tests.support.processes import REPO, Server

pytestmark = pytest.mark.integration

LIMIT = 4000  # examples/long_chat.py
TARGET = "examples.long_chat:service"
ANSWER = {"text": "Noted; tell me more whenever you like."}
SUMMARY = "They chatted about the weather and other things; nothing was decided yet."
QUESTION = "Let us keep talking about the weather and other things, shall we?"


def summariser_env(url: str) -> dict[str, str]:
    return {
        "ANKKA_MODEL_SUMMARISER_PRESET": "openai-compatible",
        "ANKKA_MODEL_SUMMARISER_URL": f"{url}/v1",
        "ANKKA_MODEL_SUMMARISER_MODEL": "standin",
        "ANKKA_COMPACTION_MODEL": "summariser",
    }


def memory_chars(body: dict[str, Any]) -> int:
    """Characters the model was sent from memory: every message before the turn's own user
    message, the instructions left out (the summary's heading is counted, to be strict)."""
    messages = [m for m in body["messages"] if m["role"] != "system"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    total = 0
    for message in messages[:last_user]:
        total += len(message.get("content") or "")
        for call in message.get("tool_calls") or ():
            total += len(call["function"]["name"]) + len(call["function"]["arguments"])
    return total


def session(server: Server, name: str = "s") -> dict[str, Any]:
    result: dict[str, Any] = httpx.get(f"{server.url}/v1/sessions/{name}", timeout=30).json()
    return result


def messages(server: Server, *, as_sent: bool = False) -> list[dict[str, Any]]:
    query = "?as_sent=true" if as_sent else ""
    answer = httpx.get(f"{server.url}/v1/sessions/s/messages{query}", timeout=30).json()
    result: list[dict[str, Any]] = answer["messages"]
    return result


def chat(client: httpx.Client, server: Server, text: str = QUESTION) -> None:
    answer = client.post(f"{server.url}/v1/agents/chat/sessions/s", json={"message": text})
    assert answer.status_code == 200, answer.text


def until(check: Callable[[], bool], what: str, *, seconds: float = 30) -> None:
    """Poll a condition (bounded): waiting for the consumer, never asserting on speed."""
    eventually(check, what=what, timeout=seconds)


def test_a_session_of_2000_turns_stays_under_the_limit_in_every_model_request(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin([ANSWER] * 2000)
    summariser = standin(
        [{"text": SUMMARY, "usage": {"input_tokens": 900, "output_tokens": 20}}] * 400
    )
    server = serve(model.url, target=TARGET, env=summariser_env(summariser.url))
    with httpx.Client(timeout=30) as client:
        for _ in range(2000):
            chat(client, server)
    sent = [r["body"] for r in received(model)]
    assert len(sent) == 2000
    sizes = [memory_chars(body) for body in sent]
    assert max(sizes) <= LIMIT, f"a request carried {max(sizes)} characters of memory"
    assert max(sizes) > LIMIT // 2  # memory did fill up between compactions
    summarised = [b for b in sent if "Summary of the earlier conversation" in str(b["messages"])]
    assert len(summarised) > 1900
    totals = session(server)
    assert totals["turns"] == 2000 and totals["messages"] == 4000
    assert totals["compactions"] >= 50
    assert totals["compaction_usage"]["input_tokens"] >= 900 * 50
    assert len(messages(server)) == 4000  # the whole conversation is still readable
    shown = messages(server, as_sent=True)
    assert shown[0]["role"] == "summary" and shown[0]["content"] == SUMMARY
    assert shown[1]["role"] == "user" and len(shown) >= 7
    summariser_requests = received(summariser)
    assert all("tools" not in r["body"] for r in summariser_requests)


def test_a_turn_never_waits_for_the_compaction_it_started(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin([ANSWER] * 200)
    summariser = standin([{"text": SUMMARY, "delay_ms": 120_000}])
    server = serve(model.url, target=TARGET, env=summariser_env(summariser.url))
    with httpx.Client(timeout=30) as client:
        for _ in range(100):
            chat(client, server)
            if received(summariser):
                break
        assert received(summariser), "no compaction was started in 100 turns"
        for _ in range(5):  # answered while the summariser is still busy
            chat(client, server)
    pending = received(summariser)
    assert len(pending) == 1 and pending[0]["answered"] is None
    assert messages(server, as_sent=True)[0]["role"] == "user"  # not adopted (yet)
    summariser.process.kill()


def test_a_restart_in_the_middle_of_a_compaction_leaves_the_session_consistent(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin([ANSWER] * 200)
    slow = standin([{"text": SUMMARY, "delay_ms": 120_000}])
    first = serve(model.url, target=TARGET, env=summariser_env(slow.url))
    turns = 0
    with httpx.Client(timeout=30) as client:
        while not received(slow):
            assert turns < 100, "no compaction was started in 100 turns"
            chat(client, first)
            turns += 1
    first.process.kill()  # SIGKILL while the summariser is being asked
    first.process.wait()
    slow.process.kill()
    fast = standin([{"text": SUMMARY}] * 5)
    second = serve(model.url, target=TARGET, env=summariser_env(fast.url))
    conversation = messages(second)
    assert len(conversation) == 2 * turns
    assert [m["role"] for m in conversation] == ["user", "assistant"] * turns
    assert session(second)["compactions"] == 0
    with httpx.Client(timeout=30) as client:
        chat(client, second)  # the next commit queues the session again
        until(lambda: session(second)["compactions"] == 1, "the compaction after the restart")
        chat(client, second)
    assert len(messages(second)) == 2 * turns + 4
    shown = messages(second, as_sent=True)
    assert shown[0]["role"] == "summary" and shown[1]["role"] == "user"
    last = received(model)[-1]["body"]["messages"]
    assert last[1]["role"] == "user" and last[1]["content"].startswith(
        "Summary of the earlier conversation:\n" + SUMMARY
    )


def test_the_long_chat_example_runs_on_its_own_stand_in_script(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    # The example's script answers the agent and the summariser alike, so one stand-in
    # serves both (the same model) without a race over whose answer is whose.
    script = json.loads((REPO / "examples" / "long-chat-standin.json").read_text())
    model = standin(script)
    server = serve(model.url, target=TARGET)
    with httpx.Client(timeout=30) as client:
        for _ in range(60):
            chat(client, server)
        until(lambda: session(server)["compactions"] >= 1, "the example's first compaction")
        bogus = client.get(f"{server.url}/v1/sessions/s/messages?as_sent=maybe")
    assert bogus.status_code == 422 and "as_sent" in bogus.json()["error"]["message"]
    assert len(messages(server)) == 120
    assert messages(server, as_sent=True)[0]["role"] == "summary"
    summaries = [r for r in received(model) if "The conversation" in str(r["body"]["messages"])]
    assert summaries and all("tools" not in r["body"] for r in summaries)
