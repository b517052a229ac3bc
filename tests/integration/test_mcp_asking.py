"""What an MCP server asks during a call, end to end: the catalogue (examples/mcp_catalog.py,
the official SDK's server) as a process on loopback, ``ankka serve`` on the agents of
tests/integration/asking_services.py, the stand-in as the model.

- a question (``elicitation/create``) is a pending decision like a tool approval: listed,
  answered over the API (approve with content checked against the form, refuse, expiry),
  the first decision wins, and the server receives the answer once;
- sampling (``sampling/createMessage``) is served by the agent's own model when it allows it,
  accounted in its usage, and refused when it does not.
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script, model_env, received
from tests.integration.test_mcp import Rig, kept
from tests.support.eventually import eventually
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

TARGET = "tests.integration.asking_services:service"
BUY = {"tool_calls": [{"name": "mcp__catalog__buy", "arguments": {"product": "kettle-1"}}]}
USAGE = {"input_tokens": 10, "output_tokens": 2}


class AskingRig(Rig):
    """The catalogue with the given options, a stand-in and ``ankka serve`` on the agents of
    asking_services.py (any number of times, on one store)."""

    def begin(self, script: Script, *catalog: str, **env: str) -> tuple[Server, Server, Server]:
        mcp = self.catalog(*catalog)
        model = self.standin(script)
        return mcp, model, self.serve(mcp.url, model, **env)

    def serve(self, mcp_url: str, model: Server, *, store: str | None = None, **env: str) -> Server:
        """``ankka serve`` (and its console) on ``store`` (default: this test's SQLite file),
        with the catalogue at ``mcp_url`` and ``model``."""
        store = store or f"sqlite:///{self.tmp_path / 'store.sqlite3'}"
        settings = {f"ANKKA_MCP_CATALOG_{k.upper()}": v for k, v in env.items()}
        command = ankka_command("serve", TARGET, "--port", "0", "--store", store)
        environment = {
            **model_env(model.url),
            "ANKKA_MCP_CATALOG_URL": mcp_url,
            **settings,
            "ANKKA_CONSOLE": "on",
        }
        return self._keep(start(command, env=environment))

    def journal(self, kind: str) -> list[dict[str, Any]]:
        with sqlite3.connect(self.tmp_path / "store.sqlite3") as db:
            rows = db.execute(
                "SELECT body FROM events WHERE kind = ? ORDER BY seq", (kind,)
            ).fetchall()
        return [json.loads(r[0]) for r in rows]


@pytest.fixture
def rig(tmp_path: Path, standin: Callable[[Script], Server]) -> Iterator[AskingRig]:
    yield from kept(AskingRig(tmp_path, standin))


class Asked:
    """A turn posted on a thread (it waits while the server's question does)."""

    def __init__(self, server: Server, agent: str = "clerk", session: str = "s") -> None:
        self.answer: httpx.Response | None = None
        self.broke: httpx.TransportError | None = None  # the runtime went away mid-turn
        url = f"{server.url}/v1/agents/{agent}/sessions/{session}"

        def post() -> None:
            try:
                self.answer = httpx.post(url, json={"message": "A kettle, please."}, timeout=120)
            except httpx.TransportError as exc:
                self.broke = exc

        self.thread = threading.Thread(target=post)
        self.thread.start()

    def result(self) -> httpx.Response:
        self.thread.join(timeout=120)
        assert self.answer is not None, "the turn did not answer"
        return self.answer


def pending_question(server: Server) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        listed = httpx.get(f"{server.url}/v1/approvals", params={"state": "pending"}).json()
        waiting = [a for a in listed["approvals"] if a.get("kind") == "elicitation"]
        return waiting[0] if waiting else None

    question = eventually(found, what="the server's question", timeout=60)
    assert question is not None
    return question


def decide(server: Server, approval: dict[str, Any], decision: str, **extra: Any) -> httpx.Response:
    body = {"decision": decision, "digest": approval["digest"], **extra}
    return httpx.post(f"{server.url}/v1/approvals/{approval['id']}", json=body, timeout=30)


def tool_result(model: Server) -> str:
    content: str = received(model)[1]["body"]["messages"][-1]["content"]
    return content


def test_a_servers_question_reaches_a_person_and_the_answer_goes_back_once(rig: AskingRig) -> None:
    mcp, model, server = rig.begin([BUY, {"text": "Bought."}], "--elicit-tool", "--handshake-only")
    turn = Asked(server)
    question = pending_question(server)
    assert question["tool"] == "mcp__catalog__buy" and question["session"] == "s"
    assert question["arguments"]["message"] == "How many of kettle-1 should I buy?"
    assert question["arguments"]["requestedSchema"]["required"] == ["quantity"]
    assert question["expires_at"] is not None

    refused = decide(server, question, "approve", content={"quantity": "three"})
    assert refused.status_code == 422, refused.text
    assert "'quantity'" in refused.text and "integer" in refused.text
    wrong = decide(server, {**question, "digest": "0" * 64}, "approve", content={"quantity": 3})
    assert wrong.status_code == 409, wrong.text
    first = decide(server, question, "approve", content={"quantity": 3})
    assert first.status_code == 200, first.text
    assert first.json() == {
        "approval": question["id"],
        "decision": "approved",
        "decided_by": "local",
        "status": "recorded",
    }
    again = decide(server, question, "refuse")
    assert again.status_code == 409 and "already decided: approved by local" in again.text

    answer = turn.result()
    assert answer.status_code == 200, answer.text
    assert tool_result(model) == "bought 3 of kettle-1"
    assert "".join(mcp.output).count("elicitation answered") == 1, mcp.output
    (recorded,) = rig.journal("elicitation_answered")
    assert recorded["action"] == "accept" and recorded["content"] == {"quantity": 3, "note": ""}
    assert recorded["request"]["digest"] == question["digest"]
    listed = httpx.get(f"{server.url}/v1/approvals", params={"state": "approved"}).json()
    (shown,) = listed["approvals"]
    assert shown["id"] == question["id"] and shown["decided_by"] == "local"
    assert shown["kind"] == "elicitation"


def test_a_person_answers_the_question_on_the_console(rig: AskingRig) -> None:
    mcp, model, server = rig.begin([BUY, {"text": "Bought."}], "--elicit-tool", "--handshake-only")
    turn = Asked(server)
    question = pending_question(server)
    browser = httpx.Client(base_url=server.url, timeout=60)  # keeps the page's cookie
    page = browser.get("/console/approvals", params={"state": "pending"})
    assert page.status_code == 200, page.text
    assert f'data-approval="{question["id"]}"' in page.text
    assert 'name="field.quantity"' in page.text and 'name="field.note"' in page.text
    token = re.search(r'name="form_token" value="([^"]+)"', page.text)
    assert token is not None
    form = {
        "decision": "approve",
        "digest": question["digest"],
        "session": "s",
        "form_token": token.group(1),
        "field.quantity": "5",
        "field.note": "",
    }
    decided = browser.post(
        f"/console/approvals/{question['id']}", data=form, headers={"Origin": server.url}
    )
    assert decided.status_code == 303, decided.text
    assert turn.result().status_code == 200
    assert tool_result(model) == "bought 5 of kettle-1"
    assert "".join(mcp.output).count("elicitation answered") == 1, mcp.output


def test_a_refused_question_is_declined_and_an_expired_one_cancelled(rig: AskingRig) -> None:
    mcp, model, server = rig.begin(
        [BUY, {"text": "Not bought."}, BUY, {"text": "Nobody answered."}],
        "--elicit-tool",
        "--handshake-only",
        elicitation_timeout="2",
    )
    turn = Asked(server)
    question = pending_question(server)
    assert decide(server, question, "refuse", reason="not today").status_code == 200
    assert turn.result().status_code == 200
    assert tool_result(model) == "the customer answered decline; nothing was bought"

    turn = Asked(server)  # nobody answers: the platform's expiry cancels
    assert turn.result().status_code == 200
    content = received(model)[3]["body"]["messages"][-1]["content"]
    assert content == "the customer answered cancel; nothing was bought"
    assert "".join(mcp.output).count("elicitation answered") == 2, mcp.output
    actions = [
        (r["action"], r["decided"]["decided_by"]) for r in rig.journal("elicitation_answered")
    ]
    assert actions == [("decline", "local"), ("cancel", "platform")]
    listed = httpx.get(f"{server.url}/v1/approvals").json()["approvals"]
    assert sorted(a["state"] for a in listed) == ["expired", "refused"]


def test_a_question_whose_turn_is_cancelled_is_closed_in_the_journal(rig: AskingRig) -> None:
    mcp, _, server = rig.begin([BUY, {"text": "Bought."}], "--elicit-tool", "--handshake-only")
    url = f"{server.url}/v1/agents/streamer/sessions/s"
    body = {"message": "A kettle, please."}
    with httpx.Client(timeout=60) as caller, caller.stream("POST", url, json=body) as answer:
        assert answer.status_code == 200, answer.read()
        question = pending_question(server)
    # The caller left: the turn is cancelled, and nobody can answer its question now.

    def closed() -> dict[str, Any] | None:
        listed = httpx.get(f"{server.url}/v1/approvals", params={"state": "ended"}).json()
        return next((a for a in listed["approvals"] if a["id"] == question["id"]), None)

    shown = eventually(closed, what="the question closed", timeout=10)
    assert shown is not None
    assert shown["decided_by"] == "platform" and "cancelled" in shown["reason"], shown
    pending = httpx.get(f"{server.url}/v1/approvals", params={"state": "pending"}).json()
    assert pending["approvals"] == []
    page = httpx.get(f"{server.url}/console/approvals", params={"state": "pending"})
    assert page.status_code == 200 and question["id"] not in page.text
    (recorded,) = rig.journal("elicitation_answered")
    assert recorded["action"] == "cancel" and recorded["content"] is None
    assert recorded["request"]["id"] == question["id"]
    assert recorded["decided"]["decision"] == "ended"
    assert "the turn that asked was cancelled" in recorded["decided"]["reason"]
    again = decide(server, question, "approve", content={"quantity": 1})
    assert again.status_code == 409, again.text
    # Its call went with the turn: the server's tool bought nothing, and was told no more
    # than cancel.
    told = re.findall(r"elicitation answered (\w+)", "".join(mcp.output))
    assert set(told) <= {"cancel"}, mcp.output


def closed_question(server: Server, question: dict[str, Any]) -> dict[str, Any]:
    """The question as listed once it is ended (it was pending until then)."""

    def closed() -> dict[str, Any] | None:
        listed = httpx.get(f"{server.url}/v1/approvals", params={"state": "ended"}).json()
        return next((a for a in listed["approvals"] if a["id"] == question["id"]), None)

    shown = eventually(closed, what="the question closed", timeout=30)
    assert shown is not None
    return shown


def test_a_question_whose_resumed_turn_is_cut_by_a_drain_is_closed(rig: AskingRig) -> None:
    mcp, _, server = rig.begin(
        [BUY, {"text": "Bought."}], "--elicit-tool", "--handshake-only", requires_approval="buy"
    )
    waits = httpx.post(f"{server.url}/v1/agents/clerk/sessions/s", json={"message": "A kettle"})
    assert waits.status_code == 202, waits.text
    (approval,) = waits.json()["approvals"]
    decided: list[httpx.Response] = []
    resume = threading.Thread(target=lambda: decided.append(decide(server, approval, "approve")))
    resume.start()  # the resumed turn runs buy, whose server asks
    question = pending_question(server)
    server.process.send_signal(signal.SIGTERM)  # the drain cuts the resumed turn, cancelled
    resume.join(timeout=60)
    assert decided and decided[0].status_code == 503, decided
    server.process.wait(timeout=30)

    (recorded,) = rig.journal("elicitation_answered")
    assert recorded["request"]["id"] == question["id"]
    assert recorded["action"] == "cancel" and recorded["content"] is None
    assert recorded["decided"]["decision"] == "ended"
    assert recorded["decided"]["decided_by"] == "platform"
    assert "the turn that asked was cancelled" in recorded["decided"]["reason"]
    (ended,) = rig.journal("turn_ended")
    assert ended["cause"] == "cancelled", ended

    again = rig.serve(mcp.url, rig.standin([]))
    shown = closed_question(again, question)
    assert shown["decided_by"] == "platform" and "cancelled" in shown["reason"], shown
    late = decide(again, question, "approve", content={"quantity": 1})
    assert late.status_code == 409, late.text
    assert "already decided: ended by platform" in late.text, late.text
    told = re.findall(r"elicitation answered (\w+)", "".join(mcp.output))
    assert set(told) <= {"cancel"}, mcp.output


def test_a_request_turns_question_is_ended_saying_the_runtime_restarted(rig: AskingRig) -> None:
    mcp, model, first = rig.begin([BUY, {"text": "Bought."}], "--elicit-tool", "--handshake-only")
    turn = Asked(first)
    question = pending_question(first)
    first.process.kill()  # SIGKILL while the question waits: no shutdown, no flush
    first.process.wait(timeout=15)
    turn.thread.join(timeout=60)
    assert turn.answer is None and turn.broke is not None  # it broke with the process

    second = rig.serve(mcp.url, model)
    shown = closed_question(second, question)
    assert shown["decided_by"] == "platform", shown
    assert "the runtime restarted before it was answered" in shown["reason"], shown
    assert shown["tool"] == "mcp__catalog__buy" and shown["session"] == "s", shown
    pending = httpx.get(f"{second.url}/v1/approvals", params={"state": "pending"}).json()
    assert pending["approvals"] == []
    late = decide(second, question, "approve", content={"quantity": 1})
    assert late.status_code == 409, late.text
    assert "ended by platform" in late.text and "the runtime restarted" in late.text, late.text
    (recorded,) = rig.journal("elicitation_answered")
    assert recorded["request"]["id"] == question["id"] and recorded["action"] == "cancel"
    assert recorded["decided"]["decision"] == "ended"
    # Nothing was answered to the server: its request ended with the first runtime's
    # connection.
    assert "elicitation answered" not in "".join(mcp.output), mcp.output


def test_a_question_of_a_task_cancelled_while_it_waits_is_closed(rig: AskingRig) -> None:
    mcp, _, server = rig.begin([BUY], "--elicit-tool", "--handshake-only")
    with httpx.Client(base_url=server.url, timeout=30) as client:
        task = {"type": "summary", "instructions": "Buy a kettle."}
        assert client.put("/v1/agents/purchaser/tasks/t1", json=task).status_code == 201
        question = pending_question(server)
        assert client.post("/v1/tasks/t1/cancel").status_code == 200
        shown = closed_question(server, question)
        assert shown["decided_by"] == "platform", shown
        assert "the task that asked ended (cancelled)" in shown["reason"], shown
        late = decide(server, question, "approve", content={"quantity": 1})
        assert late.status_code == 409, late.text
        assert "already decided: ended by platform" in late.text, late.text
        record = client.get("/v1/tasks/t1").json()
    assert record["state"] == "cancelled", record
    pending = httpx.get(f"{server.url}/v1/approvals", params={"state": "pending"}).json()
    assert pending["approvals"] == []
    (recorded,) = rig.journal("elicitation_answered")
    assert recorded["request"]["id"] == question["id"]
    assert recorded["action"] == "cancel" and recorded["decided"]["decision"] == "ended"
    # The server was answered cancel, once, and the task made no model call after it.
    told = re.findall(r"elicitation answered (\w+)", "".join(mcp.output))
    assert told == ["cancel"], mcp.output


def test_a_call_waiting_on_a_person_is_not_timed_out_by_its_read_timeout(rig: AskingRig) -> None:
    # One call asks twice. The person takes longer than the call's timeout over each question,
    # each well inside the question's expiry, and the call lasts longer than the timeout and
    # the expiry together: neither a deadline counting the person's time nor a read clock of
    # timeout + expiry lets it through. The margins are seconds wide either way (a loaded
    # machine only makes the call longer, and the server's own hops have the whole timeout).
    timeout, expiry = 3.0, 15.0
    mcp, model, server = rig.begin(
        [BUY, {"text": "Bought."}],
        "--elicit-tool",
        "--confirm",
        "--handshake-only",
        timeout=f"{timeout:g}",
        elicitation_timeout=f"{expiry:g}",
    )
    turn = Asked(server)
    first = pending_question(server)
    seen = time.monotonic()  # the call began before this
    time.sleep((timeout + expiry) / 2 + 0.5)  # 9.5 s: past the timeout, 5.5 s inside the expiry
    assert decide(server, first, "approve", content={"quantity": 2}).status_code == 200

    def second() -> dict[str, Any] | None:
        found = pending_question(server)
        return found if found["id"] != first["id"] else None

    confirm = eventually(second, what="the second question", timeout=30)
    assert confirm is not None and "Confirm" in confirm["arguments"]["message"]
    # Again past the timeout, and on until the call has lasted past timeout + expiry (19 s
    # since its first question was seen); at most 9.5 s, for the first answer went 9.5 s in.
    time.sleep(max(timeout + 1.0, seen + timeout + expiry + 1.0 - time.monotonic()))
    assert decide(server, confirm, "approve", content={"quantity": 3}).status_code == 200
    assert turn.result().status_code == 200
    assert tool_result(model) == "bought 3 of kettle-1"
    assert "".join(mcp.output).count("elicitation answered accept") == 2, mcp.output


def test_a_silent_server_with_no_question_still_times_out(rig: AskingRig) -> None:
    search = {"tool_calls": [{"name": "mcp__catalog__search", "arguments": {"query": "kettle"}}]}
    _, model, server = rig.begin(
        [search, {"text": "It did not answer."}],
        "--elicit-tool",
        "--handshake-only",
        "--delay",
        "30",
        timeout="1",
    )
    answer = Asked(server).result()
    assert answer.status_code == 200, answer.text
    assert tool_result(model) == "MCP server 'catalog' did not answer tool 'search' within 1s"


def test_a_call_resumed_after_its_approval_asks_its_question_too(rig: AskingRig) -> None:
    mcp, model, server = rig.begin(
        [BUY, {"text": "Bought."}], "--elicit-tool", "--handshake-only", requires_approval="buy"
    )
    waits = httpx.post(f"{server.url}/v1/agents/clerk/sessions/s", json={"message": "A kettle"})
    assert waits.status_code == 202, waits.text
    (approval,) = waits.json()["approvals"]
    decided: list[httpx.Response] = []
    resume = threading.Thread(target=lambda: decided.append(decide(server, approval, "approve")))
    resume.start()  # the resumed turn runs buy, whose server asks
    question = pending_question(server)
    assert decide(server, question, "approve", content={"quantity": 4}).status_code == 200
    resume.join(timeout=60)
    assert decided and decided[0].status_code == 200, decided
    assert decided[0].json()["status"] == "completed"
    assert tool_result(model) == "bought 4 of kettle-1"
    assert "".join(mcp.output).count("elicitation answered") == 1, mcp.output
    assert len(rig.journal("elicitation_answered")) == 1


def test_a_tasks_call_waits_for_the_servers_question_like_an_approval(rig: AskingRig) -> None:
    done = {"name": "complete_task", "arguments": {"title": "bought", "points": ["a kettle"]}}
    mcp, model, server = rig.begin(
        [{**BUY, "usage": USAGE}, {"tool_calls": [done], "usage": USAGE}],
        "--elicit-tool",
        "--handshake-only",
    )
    with httpx.Client(base_url=server.url, timeout=30) as client:
        task = {"type": "summary", "instructions": "Buy a kettle."}
        assert client.put("/v1/agents/purchaser/tasks/t1", json=task).status_code == 201
        question = pending_question(server)
        assert question["session"] == "task:t1" and question["agent"] == "purchaser"
        assert client.get("/v1/tasks/t1").json()["state"] == "awaiting-approval"
        assert decide(server, question, "approve", content={"quantity": 2}).status_code == 200
        record = client.get("/v1/tasks/t1", params={"wait": 60}).json()
    assert record["state"] == "completed", record
    assert tool_result(model).startswith("bought 2 of kettle-1"), tool_result(model)
    assert "".join(mcp.output).count("elicitation answered") == 1, mcp.output
    (recorded,) = rig.journal("elicitation_answered")
    assert recorded["content"] == {"quantity": 2, "note": ""}
    assert record["usage"]["input_tokens"] == 20, record


def test_a_task_killed_while_its_question_waits_asks_again_and_is_answered_once(
    rig: AskingRig,
) -> None:
    done = {"name": "complete_task", "arguments": {"title": "bought", "points": ["a kettle"]}}
    mcp, model, first = rig.begin(
        [BUY, {"tool_calls": [done]}], "--elicit-tool", "--handshake-only"
    )
    task = {"type": "summary", "instructions": "Buy a kettle."}
    assert httpx.put(f"{first.url}/v1/agents/purchaser/tasks/t1", json=task).status_code == 201
    asked = pending_question(first)
    first.process.kill()  # SIGKILL while the question waits: no shutdown, no flush
    first.process.wait(timeout=15)

    second = rig.serve(mcp.url, model)
    gone = decide(second, asked, "approve", content={"quantity": 1})
    assert gone.status_code == 409 and "no longer in flight" in gone.text, gone.text
    again = pending_question(second)  # the call ran again; the server asked again
    assert again["id"] != asked["id"] and again["arguments"] == asked["arguments"]
    assert decide(second, again, "approve", content={"quantity": 2}).status_code == 200
    record = httpx.get(f"{second.url}/v1/tasks/t1", params={"wait": 60}, timeout=70).json()
    assert record["state"] == "completed", record
    assert "".join(mcp.output).count("elicitation answered") == 1, mcp.output
    assert tool_result(model).startswith("bought 2 of kettle-1")
    (recorded,) = rig.journal("elicitation_answered")
    assert recorded["request"]["id"] == again["id"]
    states = {
        a["id"]: a["state"] for a in httpx.get(f"{second.url}/v1/approvals").json()["approvals"]
    }
    assert states.get(again["id"]) == "approved", states


def test_sampling_is_served_by_the_agents_model_when_it_allows_it(rig: AskingRig) -> None:
    describe = {"name": "mcp__catalog__describe", "arguments": {"product": "kettle-1"}}
    wrote = {"text": "A shiny steel kettle.", "usage": {"input_tokens": 7, "output_tokens": 5}}
    _, model, server = rig.begin(
        [
            {"tool_calls": [describe], "usage": USAGE},
            wrote,
            {"text": "Here it is.", "usage": USAGE},
            {"tool_calls": [describe], "usage": USAGE},
            {"text": "No description.", "usage": USAGE},
        ],
        "--sampling-tool",
        "--handshake-only",
    )
    answer = httpx.post(
        f"{server.url}/v1/agents/clerk/sessions/s", json={"message": "Hi"}, timeout=60
    )
    assert answer.status_code == 200, answer.text
    sent = received(model)
    sampling = sent[1]["body"]
    assert sampling["messages"] == [{"role": "user", "content": "kettle-1"}]
    assert "tools" not in sampling and sampling["max_tokens"] == 100
    assert "A shiny steel kettle." in sent[2]["body"]["messages"][-1]["content"]
    # The sampling call is the turn's: in its usage, its /calls and the metrics.
    assert answer.json()["usage"]["input_tokens"] == 27, answer.json()
    calls = httpx.get(f"{server.url}/v1/sessions/s/calls").json()["calls"]
    # (journaled with the turn's records, after its answers)
    assert [c.get("sampling") for c in calls] == [None, None, "catalog"], calls
    assert all(c["written"] for c in calls) and calls[2]["usage"]["input_tokens"] == 7
    metrics = httpx.get(f"{server.url}/metrics").text
    assert (
        'ankka_model_calls_total{agent="clerk",model="standin",provider="default"} 3.0' in metrics
    )

    refused = httpx.post(
        f"{server.url}/v1/agents/guarded/sessions/g", json={"message": "Hi"}, timeout=60
    )
    assert refused.status_code == 200, refused.text
    result = received(model)[4]["body"]["messages"][-1]["content"]
    assert "the client refused sampling" in result and "Sampling not supported" in result


def test_a_tasks_sampling_is_its_models_and_counts_in_its_usage(rig: AskingRig) -> None:
    describe = {"name": "mcp__catalog__describe", "arguments": {"product": "kettle-1"}}
    done = {"name": "complete_task", "arguments": {"title": "described", "points": ["ok"]}}
    wrote = {"text": "A shiny steel kettle.", "usage": {"input_tokens": 7, "output_tokens": 5}}
    _, model, server = rig.begin(
        [{"tool_calls": [describe], "usage": USAGE}, wrote, {"tool_calls": [done], "usage": USAGE}],
        "--sampling-tool",
        "--handshake-only",
    )
    with httpx.Client(base_url=server.url, timeout=70) as client:
        task = {"type": "summary", "instructions": "Describe a kettle."}
        assert client.put("/v1/agents/purchaser/tasks/t1", json=task).status_code == 201
        record = client.get("/v1/tasks/t1", params={"wait": 60}).json()
        session = client.get("/v1/sessions/task:t1").json()
        calls = client.get("/v1/sessions/task:t1/calls").json()["calls"]
        metrics = client.get("/metrics").text
    assert record["state"] == "completed", record
    assert received(model)[1]["body"]["messages"] == [{"role": "user", "content": "kettle-1"}]
    assert "A shiny steel kettle." in received(model)[2]["body"]["messages"][-1]["content"]
    assert record["usage"]["input_tokens"] == 27, record
    assert session["usage"]["input_tokens"] == 27, session
    assert [c.get("sampling") for c in calls].count("catalog") == 1, calls
    line = 'ankka_model_calls_total{agent="purchaser",model="standin",provider="default"} 3.0'
    assert line in metrics


def test_a_tasks_sampling_makes_no_model_call_past_its_token_budget(rig: AskingRig) -> None:
    describe = {"name": "mcp__catalog__describe", "arguments": {"product": "kettle-1"}}
    # The first call spends the task's 12 tokens; the server then asks for sampling.
    _, model, server = rig.begin(
        [{"tool_calls": [describe], "usage": USAGE}, {"text": "never sent"}],
        "--sampling-tool",
        "--handshake-only",
    )
    with httpx.Client(base_url=server.url, timeout=70) as client:
        task = {"type": "summary", "instructions": "Describe a kettle."}
        assert client.put("/v1/agents/frugal/tasks/t1", json=task).status_code == 201
        record = client.get("/v1/tasks/t1", params={"wait": 60}).json()
        calls = client.get("/v1/sessions/task:t1/calls").json()["calls"]
    assert record["state"] == "failed", record
    assert record["end"] == "budget_exhausted", record
    assert len(received(model)) == 1  # the sampling request made no model call
    assert [c.get("sampling") for c in calls] == [None], calls
    assert record["usage"]["input_tokens"] == 10, record
    results = [r for r in rig.journal("tool_result") if "describe" in json.dumps(r)]
    assert any("token budget (12) is spent" in json.dumps(r) for r in results), results


def test_a_task_whose_server_is_down_fails_fast_naming_it(rig: AskingRig) -> None:
    model = rig.standin([{"text": "never asked"}])
    server = rig.serve("http://127.0.0.1:1/mcp", model)  # nothing listens there
    with httpx.Client(base_url=server.url, timeout=40) as client:
        task = {"type": "summary", "instructions": "Buy a kettle."}
        assert client.put("/v1/agents/purchaser/tasks/t1", json=task).status_code == 201
        record = client.get("/v1/tasks/t1", params={"wait": 30}).json()
    assert record["state"] == "failed", record
    assert "MCP server 'catalog' is not available" in record["reason"], record
    assert received(model) == []  # before any model call
