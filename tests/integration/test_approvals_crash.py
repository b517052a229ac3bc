"""Approvals over real processes: ``ankka serve`` (stopped, or SIGKILLed) and started again on
the same store, with the stand-in as the model. The tool writes a line per run to a file the
test counts: an approved call never runs twice, and a turn cut off after its last decision is
ended, not resumed."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script, model_env
from tests.integration.tasks_crash import wait_until
from tests.support.certs import client_context, new_ca, write_tls_dir
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

TARGET = "tests.integration.approval_services:service"
SPENT = {"input_tokens": 11, "output_tokens": 5}  # by the call that suspends the turn
SUSPENDING = {
    "tool_calls": [{"name": "refund", "arguments": {"order": "A1", "amount": 250}}],
    "usage": SPENT,
}
SCRIPT: Script = [
    SUSPENDING,
    {"text": "Refunded A1."},
    {"text": "Hello again."},
]


def serve(standin: Server, store: str, env: dict[str, str]) -> Server:
    command = ankka_command("serve", TARGET, "--port", "0", "--store", store)
    return start(command, env={**model_env(standin.url), **env})


def kill(server: Server) -> None:
    server.process.kill()  # SIGKILL: no shutdown, no flush
    server.process.wait()


def runs(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def kinds(db: Path, session: str) -> list[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT kind FROM events WHERE session = ? ORDER BY seq", (session,)
        ).fetchall()
    return [str(r[0]) for r in rows]


def suspend(server: Server) -> dict[str, Any]:
    answer = httpx.post(
        f"{server.url}/v1/agents/refunds/sessions/s1", json={"message": "refund A1"}, timeout=30
    )
    assert answer.status_code == 202, answer.text
    (request,) = answer.json()["approvals"]
    return dict(request)


def decide(server: Server, request: dict[str, Any], decision: str = "approve") -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/approvals/{request['id']}",
        json={"decision": decision, "digest": request["digest"]},
        timeout=60,
    )


def setup(
    standin: Callable[[Script], Server], tmp_path: Path, **extra: str
) -> tuple[Server, str, Path, Path, dict[str, str]]:
    model = standin(SCRIPT)
    db = tmp_path / "store.sqlite3"
    log = tmp_path / "tool-runs.txt"
    env = {"ANKKA_TEST_TOOL_LOG": str(log), **extra}
    return model, f"sqlite:///{db}", db, log, env


def test_a_restart_between_suspension_and_decision_resumes_on_the_decision(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model, store, _, log, env = setup(standin, tmp_path)
    servers.append(serve(model, store, env))
    request = suspend(servers[-1])
    kill(servers[-1])
    servers.append(serve(model, store, env))
    listed = httpx.get(f"{servers[-1].url}/v1/approvals", params={"state": "pending"}).json()
    assert [a["id"] for a in listed["approvals"]] == [request["id"]]
    answer = decide(servers[-1], request)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "completed"
    assert answer.json()["turn"]["reply"] == "Refunded A1."
    assert runs(log) == ["A1 250.0"]
    assert decide(servers[-1], request).status_code == 409


def test_sigkill_after_the_decision_before_the_start_ends_the_turn_and_runs_nothing(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    pause = tmp_path / "pause"
    model, store, db, log, env = setup(
        standin,
        tmp_path,
        ANKKA_TEST_PLAN_PAUSE=str(pause),
        ANKKA_TEST_PLAN_SECONDS="30",
    )
    servers.append(serve(model, store, env))
    request = suspend(servers[-1])
    pause.touch()  # resuming plans the turn again, and now waits there
    caller = threading.Thread(target=lambda: _quietly(decide, servers[-1], request))
    caller.start()
    wait_until(lambda: "approval_decided" in kinds(db, "s1"), "the decision to be recorded")
    kill(servers[-1])
    caller.join(timeout=30)
    assert "approved_call_started" not in kinds(db, "s1")
    pause.unlink()
    servers.append(serve(model, store, env))
    assert kinds(db, "s1")[-2:] == ["unwritten_calls", "turn_ended"]
    assert runs(log) == []
    assert_cut_off_accounted(servers[-1], counted=True)
    again = decide(servers[-1], request)
    assert again.status_code == 409 and "already decided" in again.text
    session = httpx.get(f"{servers[-1].url}/v1/sessions/s1").json()
    assert session["awaiting_approval"] == []
    # The session takes new turns again; the ended turn's call never runs.
    answer = httpx.post(
        f"{servers[-1].url}/v1/agents/refunds/sessions/s1", json={"message": "hi"}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    assert runs(log) == []
    kill(servers[-1])  # and once more: the ended turn is accounted once, not again
    servers.append(serve(model, store, env))
    assert kinds(db, "s1").count("unwritten_calls") == 1
    assert_cut_off_accounted(servers[-1], counted=False)


def assert_cut_off_accounted(server: Server, *, counted: bool) -> None:
    """The cut-off turn's call (made before it suspended) in the session's unwritten usage and
    its calls; in the metrics of the process that ended it only."""
    session = httpx.get(f"{server.url}/v1/sessions/s1", timeout=10).json()
    assert session["unwritten_turns"] == 1
    assert session["unwritten_usage"]["input_tokens"] == SPENT["input_tokens"]
    assert session["unwritten_usage"]["output_tokens"] == SPENT["output_tokens"]
    calls = httpx.get(f"{server.url}/v1/sessions/s1/calls", timeout=10).json()["calls"]
    unwritten = [c for c in calls if not c["written"]]
    assert [(c["reason"], c["agent"]) for c in unwritten] == [("cut_off", "refunds")]
    metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
    spent = [
        line
        for line in metrics.splitlines()
        if line.startswith('ankka_tokens_total{agent="refunds",kind="input"')
    ]
    assert [line.rsplit(" ", 1)[1] for line in spent] == (["11.0"] if counted else [])


def test_sigkill_after_the_start_before_the_result_never_runs_the_tool_again(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model, store, db, log, env = setup(standin, tmp_path, ANKKA_TEST_TOOL_SECONDS="30")
    servers.append(serve(model, store, env))
    request = suspend(servers[-1])
    caller = threading.Thread(target=lambda: _quietly(decide, servers[-1], request))
    caller.start()
    wait_until(lambda: runs(log) == ["A1 250.0"], "the approved tool to start")
    assert "approved_call_started" in kinds(db, "s1")
    kill(servers[-1])
    caller.join(timeout=30)
    servers.append(serve(model, store, {**env, "ANKKA_TEST_TOOL_SECONDS": "0"}))
    recorded = kinds(db, "s1")
    assert recorded[-1] == "turn_ended" and "tool_result" not in recorded
    with sqlite3.connect(db) as conn:
        (body,) = conn.execute(
            "SELECT body FROM events WHERE session = 's1' AND kind = 'turn_ended'"
        ).fetchone()
    assert json.loads(body)["cause"] == "cut_off"
    assert decide(servers[-1], request).status_code == 409
    assert runs(log) == ["A1 250.0"]  # once, never twice


RESUMED = {"input_tokens": 7, "output_tokens": 3}  # by the resumed turn's model call


def test_sigkill_after_a_resumed_call_accounts_it_once_with_the_cut_off_turn(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    small = {"tool_calls": [{"name": "refund", "arguments": {"order": "B2", "amount": 50}}]}
    model = standin([SUSPENDING, {**small, "usage": RESUMED}, {"text": "Refunded both."}])
    db, log = tmp_path / "store.sqlite3", tmp_path / "tool-runs.txt"
    env = {"ANKKA_TEST_TOOL_LOG": str(log), "ANKKA_TEST_SMALL_TOOL_SECONDS": "30"}
    servers.append(serve(model, f"sqlite:///{db}", env))
    request = suspend(servers[-1])
    caller = threading.Thread(target=lambda: _quietly(decide, servers[-1], request))
    caller.start()
    # The resumed turn's model call has returned and B2's refund runs: SIGKILL mid-resume.
    wait_until(lambda: runs(log) == ["A1 250.0", "B2 50.0"], "the resumed turn's second tool")
    assert "resumed_call" in kinds(db, "s1")
    kill(servers[-1])
    caller.join(timeout=30)
    servers.append(serve(model, f"sqlite:///{db}", {**env, "ANKKA_TEST_SMALL_TOOL_SECONDS": "0"}))
    assert kinds(db, "s1")[-2:] == ["unwritten_calls", "turn_ended"]
    assert_resumed_accounted(servers[-1], counted=True)
    kill(servers[-1])  # and once more: recorded and counted once, not again
    servers.append(serve(model, f"sqlite:///{db}", env))
    assert kinds(db, "s1").count("unwritten_calls") == 1
    assert_resumed_accounted(servers[-1], counted=False)
    assert runs(log) == ["A1 250.0", "B2 50.0"]  # the cut-off turn ran nothing again


def assert_resumed_accounted(server: Server, *, counted: bool) -> None:
    """Both calls of the cut-off turn (before its suspension, after its resume) in its
    unwritten usage and calls; in the metrics of the process that ended it only."""
    session = httpx.get(f"{server.url}/v1/sessions/s1", timeout=10).json()
    assert session["unwritten_turns"] == 1 and session["turns"] == 0
    spent = {k: SPENT[k] + RESUMED[k] for k in SPENT}
    assert {k: session["unwritten_usage"][k] for k in spent} == spent
    calls = httpx.get(f"{server.url}/v1/sessions/s1/calls", timeout=10).json()["calls"]
    assert [(c["reason"], c["usage"]["input_tokens"]) for c in calls] == [
        ("cut_off", SPENT["input_tokens"]),
        ("cut_off", RESUMED["input_tokens"]),
    ]
    metrics = httpx.get(f"{server.url}/metrics", timeout=10).text
    line = 'ankka_tokens_total{agent="refunds",kind="input",provider="default"}'
    counts = [m.rsplit(" ", 1)[1] for m in metrics.splitlines() if m.startswith(line)]
    assert counts == ([f"{float(spent['input_tokens'])}"] if counted else [])


def _quietly(call: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(httpx.HTTPError):  # the server was killed under the request
        call(*args)


TASK_SCRIPT: Script = [
    {"when": "user", "tool_calls": [{"name": "publish", "arguments": {"topic": "ankka"}}]},
    {
        "when": "tool",
        "tool_calls": [
            {"name": "complete_task", "arguments": {"title": "ankka", "points": ["published"]}}
        ],
    },
]


def test_an_autonomous_task_waits_survives_a_restart_and_completes_once_decided(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model = standin(TASK_SCRIPT)
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    log = tmp_path / "tool-runs.txt"
    env = {"ANKKA_TEST_TOOL_LOG": str(log)}
    servers.append(serve(model, store, env))
    url = servers[-1].url
    body = {"type": "summary", "instructions": "Publish ankka."}
    put = httpx.put(f"{url}/v1/agents/researcher/tasks/t1", json=body, timeout=30)
    assert put.status_code == 201, put.text

    def pending(at: str) -> list[dict[str, Any]]:
        answer = httpx.get(
            f"{at}/v1/approvals", params={"session": "task:t1", "state": "pending"}, timeout=10
        )
        return list(answer.json()["approvals"])

    wait_until(lambda: len(pending(url)) == 1, "the task's approval request")
    task = httpx.get(f"{url}/v1/tasks/t1", timeout=10).json()
    assert task["state"] == "awaiting-approval", task
    kill(servers[-1])
    servers.append(serve(model, store, env))
    url = servers[-1].url
    (request,) = pending(url)
    assert request["tool"] == "publish" and request["arguments"] == {"topic": "ankka"}
    assert httpx.get(f"{url}/v1/tasks/t1", timeout=10).json()["state"] == "awaiting-approval"
    assert runs(log) == []
    answer = decide(servers[-1], request)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "resumed"
    final = httpx.get(f"{url}/v1/tasks/t1", params={"wait": 60}, timeout=90).json()
    assert final["state"] == "completed", final
    assert runs(log) == ["publish ankka"]
    assert decide(servers[-1], request).status_code == 409


def test_over_mtls_the_decider_is_the_client_certificate_s_uri_san(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    ca = new_ca()
    tls_dir = write_tls_dir(
        tmp_path / "tls", leaf=ca.issue("ankka://service/shop/refunds", server=True), ca_pem=ca.pem
    )
    person = client_context(ca, ca.issue("ankka://person/ann"), tmp_path, stem="ann")
    model, store, _, log, env = setup(standin, tmp_path)
    command = ankka_command("serve", TARGET, "--port", "0", "--store", store)
    servers.append(
        start([*command, "--tls-dir", str(tls_dir)], env={**model_env(model.url), **env})
    )
    url = servers[-1].url.replace("127.0.0.1", "localhost")
    assert url.startswith("https://")
    with httpx.Client(verify=person, timeout=30) as client:
        answer = client.post(f"{url}/v1/agents/refunds/sessions/s1", json={"message": "refund A1"})
        assert answer.status_code == 202, answer.text
        (request,) = answer.json()["approvals"]
        decided = client.post(
            f"{url}/v1/approvals/{request['id']}",
            json={"decision": "approve", "digest": request["digest"]},
            headers={"X-Ankka-Approver": "mallory"},  # no header is trusted: none configured
        )
    assert decided.status_code == 200, decided.text
    assert decided.json()["decided_by"] == "ankka://person/ann"
    assert runs(log) == ["A1 250.0"]


def test_over_mtls_the_decider_is_the_identity_the_policy_authorised(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    """A certificate whose first URI SAN is not its ankka:// identity: the decision records
    the identity the decide right was checked for, not the first SAN (issue 31, item 5)."""
    ca = new_ca()
    tls_dir = write_tls_dir(
        tmp_path / "tls", leaf=ca.issue("ankka://service/shop/refunds", server=True), ca_pem=ca.pem
    )
    uris = ("spiffe://cluster.local/ns/shop/sa/mallory", "ankka://service/shop/alice")
    leaf = ca.leaf("alice", uris=uris, client=True)
    person = client_context(ca, leaf, tmp_path, stem="alice")
    model, store, _, _, env = setup(standin, tmp_path)
    command = ankka_command("serve", TARGET, "--port", "0", "--store", store)
    servers.append(
        start([*command, "--tls-dir", str(tls_dir)], env={**model_env(model.url), **env})
    )
    url = servers[-1].url.replace("127.0.0.1", "localhost")
    with httpx.Client(verify=person, timeout=30) as client:
        answer = client.post(f"{url}/v1/agents/refunds/sessions/s1", json={"message": "refund A1"})
        assert answer.status_code == 202, answer.text
        (request,) = answer.json()["approvals"]
        decided = client.post(
            f"{url}/v1/approvals/{request['id']}",
            json={"decision": "approve", "digest": request["digest"]},
        )
        assert decided.status_code == 200, decided.text
        assert decided.json()["decided_by"] == "shop/alice"
        listed = client.get(f"{url}/v1/approvals", params={"session": "s1"}).json()
    assert [a["decided_by"] for a in listed["approvals"]] == ["shop/alice"]
    assert "mallory" not in json.dumps(listed)
