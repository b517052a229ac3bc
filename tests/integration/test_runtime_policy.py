"""The session policy over the real HTTP server and real mTLS: two callers with client
certificates from a test CA, neither of whom may read, write, list or decide the other's
session; a third the operator's ``--access-file`` lets read (not decide); the platform may do
all. Instances are their creator's and the platform's. A bad access file refuses the start,
naming its entry."""

from __future__ import annotations

import json
import ssl
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script, received
from tests.support.certs import client_context, new_ca, write_tls_dir
from tests.support.processes import REPO, Server, ankka_command

pytestmark = pytest.mark.integration

Serve = Callable[..., Server]
TARGET = "tests.integration.approval_services:service"
REFUND = {"tool_calls": [{"name": "refund", "arguments": {"order": "A1", "amount": 250}}]}


def test_two_callers_cannot_read_write_list_or_decide_each_others_sessions(
    standin: Callable[[Script], Server], serve: Serve, tmp_path: Path
) -> None:
    ca = new_ca()
    tls_dir = tmp_path / "tls"
    write_tls_dir(
        tls_dir, leaf=ca.issue("ankka://service/shop/runtime", server=True), ca_pem=ca.pem
    )

    def person(uri: str, stem: str) -> ssl.SSLContext:
        return client_context(ca, ca.issue(uri), tmp_path, stem=stem)

    alice = person("ankka://service/shop/alice", "alice")
    bob = person("ankka://service/shop/bob", "bob")
    auditor = person("ankka://service/audit/reader", "auditor")
    platform = person("ankka://platform/operator", "operator")
    access = tmp_path / "access.yaml"
    access.write_text("agents:\n  refunds:\n    read: ['ankka://service/audit/*']\n")
    model = standin([REFUND, REFUND, "Alice's refund is done.", "Bob's refund is done."])
    args = ["--tls-dir", str(tls_dir), "--access-file", str(access)]
    server = serve(model.url, target=TARGET, args=args)
    url = server.url.replace("http://", "https://")

    def call(context: ssl.SSLContext, method: str, path: str, **kw: Any) -> httpx.Response:
        with httpx.Client(verify=context, timeout=30) as client:
            return client.request(method, f"{url}{path}", **kw)

    def turn(context: ssl.SSLContext, session: str) -> httpx.Response:
        body = {"message": "refund A1"}
        return call(context, "POST", f"/v1/agents/refunds/sessions/{session}", json=body)

    def listed(context: ssl.SSLContext) -> list[str]:
        answer = call(context, "GET", "/v1/approvals")
        assert answer.status_code == 200, answer.text
        return [a["session"] for a in answer.json()["approvals"]]

    def decide(context: ssl.SSLContext, approval: dict[str, Any]) -> httpx.Response:
        body = {"decision": "approve", "digest": approval["digest"]}
        return call(context, "POST", f"/v1/approvals/{approval['id']}", json=body)

    waiting_a = turn(alice, "alices")
    waiting_b = turn(bob, "bobs")
    assert (waiting_a.status_code, waiting_b.status_code) == (202, 202), waiting_a.text
    [approval_a] = waiting_a.json()["approvals"]
    [approval_b] = waiting_b.json()["approvals"]

    # Neither reads, writes, lists or decides the other's.
    for intruder, theirs, approval in ((bob, "alices", approval_a), (alice, "bobs", approval_b)):
        for path in (f"/v1/sessions/{theirs}", f"/v1/sessions/{theirs}/messages"):
            refused = call(intruder, "GET", path)
            assert refused.status_code == 403, refused.text
            assert "refund A1" not in refused.text  # nothing of the session's content
        wrote = turn(intruder, theirs)
        decided = decide(intruder, approval)
        for refused in (wrote, decided):
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"]["type"] == "not_permitted"
        assert "shop/" in decided.json()["error"]["message"]  # names the caller
        assert "decide" in decided.json()["error"]["message"]  # and what it may not do
        assert "refund A1" not in decided.text
    assert listed(alice) == ["alices"]
    assert listed(bob) == ["bobs"]

    # The auditor may read the refunds agent's sessions (the access file), not decide them.
    assert sorted(listed(auditor)) == ["alices", "bobs"]
    assert call(auditor, "GET", "/v1/sessions/alices/messages").status_code == 200
    assert decide(auditor, approval_a).status_code == 403
    assert turn(auditor, "alices").status_code == 403

    # The platform sees every approval; each creator decides their own.
    assert sorted(listed(platform)) == ["alices", "bobs"]
    done = decide(alice, approval_a)
    assert done.status_code == 200, done.text
    assert done.json()["turn"]["reply"] == "Alice's refund is done."
    assert decide(platform, approval_b).json()["decided_by"] == "ankka://platform/operator"
    server.stop()


def test_an_instance_is_its_creators_and_the_platforms(
    standin: Callable[[Script], Server], serve: Serve, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    alice, bob, admin = "alice-token-0123456789", "bob-token-0123456789ab", "admin-token-01234567"
    tokens.write_text(f"alice {alice}\nbob {bob}\nankka://platform/admin {admin}\n")
    script = json.loads((REPO / "examples" / "tasks-standin.json").read_text())
    model = standin(script)
    server = serve(model.url, target="examples.tasks:service", args=["--token-file", str(tokens)])

    def call(method: str, path: str, token: str, **kw: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {token}"}
        return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30, **kw)

    inbox = "/v1/agents/researcher/instances/inbox"
    body = {"type": "summary", "instructions": "Summarise ankka.", "instance": "inbox"}
    assert call("POST", f"{inbox}/suspend", alice).status_code == 404  # no such instance yet
    created = call("PUT", "/v1/agents/researcher/tasks/t1", alice, json=body)
    assert created.status_code == 201, created.text
    final = call("GET", "/v1/tasks/t1", alice, params={"wait": 20}).json()
    assert final["state"] == "completed"

    # The instance holds no unfinished task now: still only its creator's and the platform's.
    asks = (("GET", inbox), ("POST", f"{inbox}/suspend"), ("GET", f"{inbox}/notifications"))
    for method, path in asks:
        refused = call(method, path, bob)
        assert refused.status_code == 403, refused.text
        assert "'bob'" in refused.json()["error"]["message"]
    assert call("POST", f"{inbox}/terminate", bob).status_code == 403
    given = {**body, "instructions": "Summarise something else."}
    assert call("PUT", "/v1/agents/researcher/tasks/t2", bob, json=given).status_code == 403
    assert call("GET", inbox, alice).json()["state"] == "active"
    assert call("GET", inbox, alice).json()["created_by"] == "alice"
    assert call("POST", f"{inbox}/suspend", admin).json()["state"] == "suspended"
    assert call("POST", f"{inbox}/resume", alice).json()["state"] == "active"
    server.stop()


def _token_callers(
    standin: Callable[[Script], Server], serve: Serve, tmp_path: Path, rounds: int
) -> tuple[Server, Callable[..., httpx.Response]]:
    """``ankka serve`` of the tasks example with callers alice, bob and the platform
    (``--token-file``), and a stand-in answering ``rounds`` tasks."""
    tokens = tmp_path / "tokens"
    tokens.write_text(
        "alice alice-token-0123456789\nbob bob-token-0123456789ab\n"
        "ankka://platform/admin admin-token-01234567\n"
    )
    script = json.loads((REPO / "examples" / "tasks-standin.json").read_text())
    model = standin(script * rounds)
    server = serve(model.url, target="examples.tasks:service", args=["--token-file", str(tokens)])
    token = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789ab"}

    def call(who: str, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {token[who]}"}
        return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30, **kw)

    return model, call


def test_a_dependency_needs_read_access_and_is_answered_as_a_missing_one(
    standin: Callable[[Script], Server], serve: Serve, tmp_path: Path
) -> None:
    model, call = _token_callers(standin, serve, tmp_path, rounds=2)
    body = {"type": "summary", "instructions": "Summarise ankka."}
    assert call("alice", "PUT", "/v1/agents/researcher/tasks/a1", json=body).status_code == 201
    assert call("alice", "GET", "/v1/tasks/a1", params={"wait": 20}).json()["state"] == (
        "completed"
    )
    assert call("bob", "GET", "/v1/tasks/a1").status_code == 403

    # bob names alice's task, then one that does not exist: one answer, word for word.
    theirs = call(
        "bob", "PUT", "/v1/agents/researcher/tasks/b1", json={**body, "depends_on": ["a1"]}
    )
    nothing = call(
        "bob", "PUT", "/v1/agents/researcher/tasks/b1", json={**body, "depends_on": ["zz"]}
    )
    assert theirs.status_code == nothing.status_code == 422, theirs.text
    assert (
        theirs.json()["error"]["message"].replace("'a1'", "'zz'")
        == (nothing.json()["error"]["message"])
    )
    assert "ankka is an agent platform" not in theirs.text
    assert call("bob", "GET", "/v1/tasks/b1").status_code == 404  # nothing was created

    # alice's own dependency is hers to name, and her task is given its result.
    mine = call(
        "alice", "PUT", "/v1/agents/researcher/tasks/a2", json={**body, "depends_on": ["a1"]}
    )
    assert mine.status_code == 201, mine.text
    assert call("alice", "GET", "/v1/tasks/a2", params={"wait": 20}).json()["state"] == (
        "completed"
    )
    seen = [json.dumps(r["body"]) for r in received(model)]
    assert sum("ankka is an agent platform" in text for text in seen) >= 1


def test_no_caller_takes_a_tasks_own_instance_or_one_being_claimed(
    standin: Callable[[Script], Server], serve: Serve, tmp_path: Path
) -> None:
    rounds = 20
    _, call = _token_callers(standin, serve, tmp_path, rounds=rounds + 1)
    body = {"type": "summary", "instructions": "Summarise ankka."}

    # task.X is task X's own instance: bob cannot name it before X exists.
    squat = call(
        "bob", "PUT", "/v1/agents/researcher/tasks/b0", json={**body, "instance": "task.x"}
    )
    assert squat.status_code == 422, squat.text
    assert "'task.x'" in squat.json()["error"]["message"]
    assert (
        call("bob", "POST", "/v1/agents/researcher/instances/task.x/terminate").status_code == 404
    )
    assert call("alice", "PUT", "/v1/agents/researcher/tasks/x", json=body).status_code == 201
    own = "/v1/agents/researcher/instances/task.x"
    for method, path in (
        ("GET", own),
        ("POST", f"{own}/terminate"),
        ("GET", f"{own}/notifications"),
    ):
        assert call("bob", method, path).status_code == 403, path

    # Two callers claiming one new instance at once: exactly one gets it, every time.
    def claim(who: str, n: int) -> int:
        task = {**body, "instance": f"shared-{n}"}
        return call(who, "PUT", f"/v1/agents/researcher/tasks/{who}-{n}", json=task).status_code

    with ThreadPoolExecutor(max_workers=2) as pool:
        for n in range(rounds):
            answers = sorted(pool.map(claim, ("alice", "bob"), (n, n)))
            assert answers == [201, 403], (n, answers)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("agents:\n  nobody:\n    read: [local]\n", "agents.nobody"),
        ("service:\n  peek: [local]\n", "'peek'"),
        ("service:\n  read: local\n", "service.read"),
        ("service:\n  read: ['shop/*/x']\n", "service.read[0]"),
        ("service: [", "not YAML"),
    ],
    ids=["unknown-agent", "unknown-right", "not-a-list", "star-inside", "syntax"],
)
def test_a_bad_access_file_refuses_the_start_naming_its_entry(
    tmp_path: Path, text: str, named: str
) -> None:
    access = tmp_path / "access.yaml"
    access.write_text(text)
    done = subprocess.run(
        ankka_command(
            "serve", TARGET, "--port", "0", "--store", f"sqlite:///{tmp_path / 's.sqlite3'}",
            "--access-file", str(access),
        ),
        capture_output=True, text=True, timeout=60, cwd=REPO, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and str(access) in done.stderr
