"""An autonomous agent on the one engine, end to end over real processes: ``ankka serve``,
the stand-in as the model, the official SDK's MCP server (examples/mcp_catalog.py). It uses
its MCP server's tools, its result guardrail keeps a poisoned result from the model and the
journal, its task's session is compacted, every request it sends extends the one before
(until the compaction, and after it again), and its tokens show on its session; and on each
of the three wires, a task's requests keep the loop's invariants as the stand-in received
them."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script, received
from tests.support.eventually import eventually
from tests.support.processes import REPO, Server, ankka_command, start

pytestmark = pytest.mark.integration

TARGET = "tests.integration.engine_services:service"
WIRES_TARGET = "tests.integration.engine_services:wires"
TASK = {"type": "summary", "instructions": "Find a kettle, a toaster, a mug and a teapot."}
QUERIES = ["kettle", "toaster", "mug", "teapot", "steel", "glass"]
SUMMARY = "Searched the catalogue for " + ", ".join(QUERIES) + "; the toaster's text was withheld."
DONE = {"name": "complete_task", "arguments": {"title": "shopping", "points": ["found them"]}}
USAGE = {"input_tokens": 10, "output_tokens": 2}


def search(query: str) -> dict[str, Any]:
    call = {"name": "mcp__catalog__search", "arguments": {"query": query}}
    return {"tool_calls": [call], "usage": USAGE}


def messages_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    body = request["body"]
    found: list[dict[str, Any]] = body.get("messages") or body.get("input") or []
    return found


def check_extends(before: dict[str, Any], after: dict[str, Any], key: str) -> None:
    """``after`` is ``before`` with messages appended (everything else the same)."""
    rest = {k: v for k, v in before.items() if k != key}
    assert rest == {k: v for k, v in after.items() if k != key}
    assert after[key][: len(before[key])] == before[key]


def test_an_autonomous_agent_uses_mcp_tools_result_guardrails_and_compaction(
    tmp_path: Path, standin: Callable[[Script], Server]
) -> None:
    catalog_script = str(REPO / "examples" / "mcp_catalog.py")
    catalog = start([sys.executable, catalog_script, "--port", "0", "--delay", "0.3"])
    # The later answers take their time, so the compaction the first ones started (after
    # their commits, never waited for) has landed before the last requests are made.
    turns = [search(q) for q in QUERIES] + [{"tool_calls": [DONE], "usage": USAGE}]
    for turn in turns[3:]:
        turn["delay_ms"] = 1500
    model = standin(turns)
    summariser = standin([{"text": SUMMARY, "usage": USAGE}] * 4)
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    env = {
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": f"{model.url}/v1",
        "ANKKA_MODEL_DEFAULT_MODEL": "standin",
        "ANKKA_MODEL_SUMMARISER_PRESET": "openai-compatible",
        "ANKKA_MODEL_SUMMARISER_URL": f"{summariser.url}/v1",
        "ANKKA_MODEL_SUMMARISER_MODEL": "standin",
        "ANKKA_MCP_CATALOG_URL": catalog.url,
    }
    server = start(ankka_command("serve", TARGET, "--port", "0", "--store", store), env=env)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            assert client.put("/v1/agents/buyer/tasks/t1", json=TASK).status_code == 201
            record = client.get("/v1/tasks/t1", params={"wait": 60}).json()
            session = client.get("/v1/sessions/task:t1").json()
            history = client.get("/v1/sessions/task:t1/messages").json()["messages"]
    finally:
        server.stop()
        catalog.stop()
    assert record["state"] == "completed", record
    requests = [r for r in received(model) if r["path"] == "/v1/chat/completions"]
    assert len(requests) == len(QUERIES) + 1
    # Its MCP server's tools are offered beside the built-in ones, and a call is required.
    for request in requests:
        offered = [t["function"]["name"] for t in request["body"]["tools"]]
        assert offered == ["mcp__catalog__search", "complete_task", "fail_task"]
        assert request["body"]["tool_choice"] == "required"
    # The poisoned result reached neither the model nor the journal.
    sent = "\n".join(str(m.get("content")) for m in messages_of(requests[-1]))
    assert "IGNORE PREVIOUS INSTRUCTIONS" not in sent
    assert "Steel kettle" in str(history) and "IGNORE PREVIOUS" not in str(history)
    # The task's session was compacted, and the requests after it carry the summary in the
    # task message (never a second user message).
    assert session["compactions"] >= 1, (session, [m.get("content") for m in history])
    compacted = ["Summary of the work on this task so far" in str(messages_of(r)[1]["content"])
                 for r in requests]  # fmt: skip
    assert compacted[0] is False and compacted[-1] is True, compacted
    # Each request extends the one before, but across the compaction.
    for (a, before), (b, after) in itertools.pairwise(zip(compacted, requests, strict=True)):
        if a == b:
            check_extends(before["body"], after["body"], "messages")
    # Its tokens show on its session: every iteration's call, as turns.
    assert session["usage"]["input_tokens"] == 10 * len(requests), session
    assert record["usage"]["input_tokens"] == 10 * len(requests), record


WIRES = {
    "openai-compatible": ("/v1/chat/completions", "messages"),
    "openai": ("/v1/responses", "input"),
    "anthropic": ("/v1/messages", "messages"),
}


@pytest.mark.parametrize("preset", list(WIRES))
def test_a_tasks_requests_keep_the_loop_invariants_on_every_wire(
    tmp_path: Path, standin: Callable[[Script], Server], preset: str
) -> None:
    lookups = [
        {"tool_calls": [{"name": "lookup", "arguments": {"topic": topic}}]}
        for topic in ("ankka", "sqlite", "postgresql")  # three alike would end the task
    ]
    model = standin([*lookups, {"tool_calls": [DONE]}])
    url = model.url if preset == "anthropic" else f"{model.url}/v1"
    env = {
        "ANKKA_MODEL_DEFAULT_PRESET": preset,
        "ANKKA_MODEL_DEFAULT_URL": url,
        "ANKKA_MODEL_DEFAULT_MODEL": "standin",
        **({} if preset == "openai-compatible" else {"ANKKA_MODEL_DEFAULT_API_KEY": "k-test"}),
    }
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    command = ankka_command("serve", WIRES_TARGET, "--port", "0", "--store", store)
    server = start(command, env=env)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            body = {"type": "summary", "instructions": "Summarise ankka."}
            assert client.put("/v1/agents/researcher/tasks/t1", json=body).status_code == 201
            record = eventually(
                lambda: (r := client.get("/v1/tasks/t1").json())["state"] == "completed" and r,
                what="the task completed",
                timeout=60,
            )
    finally:
        server.stop()
    assert record["iterations"]["used"] == 4
    path, key = WIRES[preset]
    bodies = [r["body"] for r in received(model) if r["path"] == path]
    assert len(bodies) == 4
    for body in bodies:
        roles = [m.get("role") or m.get("type") for m in body[key]]
        for a, b in itertools.pairwise(roles):
            assert not (a == b and a in ("user", "assistant")), roles
    # Near the end of a budget of 4, each request is told where it stands in its newest
    # message (the last tool result), which later requests send again unchanged.
    assert "This is iteration 3 of 4: 2 iterations remain" in str(bodies[2][key][-1])
    assert "This is iteration 4 of 4, the last" in str(bodies[3][key][-1])
    assert "This is iteration" not in str(bodies[1][key])
    for before, after in itertools.pairwise(bodies):
        check_extends(before, after, key)
