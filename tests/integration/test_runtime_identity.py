"""Caller identity on ``ankka serve`` (issue 13, defect 11, in part): on loopback without TLS
or tokens every caller is ``local``; bound elsewhere it refuses to start without a way to
identify callers; with a token file or client certificates (real mTLS) an unidentified caller
is refused, and a session is its creator's (and the platform's) only."""

from __future__ import annotations

import json
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script
from tests.support.certs import client_context, new_ca, write_tls_dir
from tests.support.processes import REPO, Server, ankka_command

pytestmark = pytest.mark.integration

Serve = Callable[..., Server]
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefgh"


def _turn(
    server: Server, token: str | None = None, session: str = "s", **kw: object
) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.post(
        f"{server.url}/v1/agents/polite/sessions/{session}",
        json={"message": "hello"},
        headers=headers,
        timeout=30,
        **kw,  # type: ignore[arg-type]
    )


def test_a_non_loopback_address_without_identity_refuses_to_start(tmp_path: Path) -> None:
    done = subprocess.run(
        ankka_command(
            "serve", "tests.integration.services:service", "--host", "0.0.0.0", "--port", "0",
            "--store", f"sqlite:///{tmp_path / 's.sqlite3'}",
        ),
        capture_output=True, text=True, timeout=60, cwd=REPO, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--tls-dir" in done.stderr and "--token-file" in done.stderr


def test_tokens_name_callers_and_a_session_is_its_creators(
    standin: Callable[[Script], Server], serve: Serve, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# caller token\nalice {ALICE}\nbob {BOB}\n")
    model = standin(["hi alice", "hi again"])
    server = serve(model.url, args=["--token-file", str(tokens)])

    nobody = _turn(server)
    wrong = _turn(server, "not-a-token-at-all-0000")
    created = _turn(server, ALICE)
    intruder = _turn(server, BOB)
    again = _turn(server, ALICE)
    read_by_bob = httpx.get(
        f"{server.url}/v1/sessions/s/messages", headers={"authorization": f"Bearer {BOB}"}
    )
    health = httpx.get(f"{server.url}/healthz")

    assert (nobody.status_code, wrong.status_code) == (401, 401)
    assert nobody.json()["error"]["type"] == "unauthenticated"
    assert created.status_code == 200 and again.status_code == 200
    assert intruder.status_code == 403
    assert intruder.json()["error"]["type"] == "not_permitted"
    assert "'bob'" in intruder.json()["error"]["message"]
    assert read_by_bob.status_code == 403
    assert health.status_code == 200, "probes need no identity"
    assert ALICE not in server.stop()


def test_client_certificates_name_callers_over_real_mtls(
    standin: Callable[[Script], Server], serve: Serve, tmp_path: Path
) -> None:
    ca = new_ca()
    tls_dir = tmp_path / "tls"
    write_tls_dir(
        tls_dir, leaf=ca.issue("ankka://service/shop/runtime", server=True), ca_pem=ca.pem
    )
    alice = client_context(ca, ca.issue("ankka://service/shop/alice"), tmp_path, stem="alice")
    bob = client_context(ca, ca.issue("ankka://service/shop/bob"), tmp_path, stem="bob")
    nameless = client_context(ca, ca.leaf("x", client=True), tmp_path, stem="nameless")
    platform = client_context(ca, ca.issue("ankka://platform/operator"), tmp_path, stem="op")
    model = standin(["hi alice"])
    server = serve(model.url, args=["--tls-dir", str(tls_dir)])
    url = server.url.replace("http://", "https://")

    def turn(context: ssl.SSLContext) -> httpx.Response:
        with httpx.Client(verify=context, timeout=30) as client:
            return client.post(f"{url}/v1/agents/polite/sessions/s", json={"message": "hello"})

    def read(context: ssl.SSLContext) -> httpx.Response:
        with httpx.Client(verify=context, timeout=30) as client:
            return client.get(f"{url}/v1/sessions/s/messages")

    assert turn(nameless).status_code == 403
    assert turn(alice).status_code == 200
    assert turn(bob).status_code == 403
    assert read(bob).status_code == 403
    assert read(platform).status_code == 200, "the platform may read every session"
    assert [m["content"] for m in read(alice).json()["messages"]] == ["hello", "hi alice"]


def test_with_certificates_and_tokens_a_caller_without_a_certificate_sends_a_token(
    standin: Callable[[Script], Server], serve: Serve, tmp_path: Path
) -> None:
    """The runtime in a cluster: it asks for a client certificate but does not require one,
    because reviewed or static tokens are accepted too; a certificate that is sent decides."""
    ca = new_ca()
    tls_dir = tmp_path / "tls"
    write_tls_dir(
        tls_dir, leaf=ca.issue("ankka://service/shop/runtime", server=True), ca_pem=ca.pem
    )
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\n")
    nobody = client_context(ca, None, tmp_path)
    nameless = client_context(ca, ca.leaf("x", client=True), tmp_path, stem="nameless")
    agent = client_context(ca, ca.issue("ankka://service/shop/alice"), tmp_path, stem="agent")
    model = standin(["hi alice"])
    server = serve(model.url, args=["--tls-dir", str(tls_dir), "--token-file", str(tokens)])
    url = server.url.replace("http://", "https://")

    def turn(context: ssl.SSLContext, token: str | None = None) -> httpx.Response:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        with httpx.Client(verify=context, timeout=30) as client:
            return client.post(
                f"{url}/v1/agents/polite/sessions/s", json={"message": "hello"}, headers=headers
            )

    unidentified = turn(nobody)
    assert unidentified.status_code == 401
    assert unidentified.json()["error"]["type"] == "unauthenticated"
    assert turn(nobody, ALICE).status_code == 200, "no certificate: the token names the caller"
    # A certificate that is sent names the caller, whatever token comes with it.
    assert turn(nameless, ALICE).status_code == 403
    assert turn(agent, ALICE).status_code == 403, "shop/alice is not the token's 'alice'"
    assert ALICE not in server.stop()


def test_loopback_without_identity_trusts_callers_as_local(
    standin: Callable[[Script], Server], serve: Serve
) -> None:
    model = standin(["hi"])
    server = serve(model.url)

    assert _turn(server).status_code == 200
    assert "trusted as 'local'" in server.stop()


def test_a_task_and_its_session_are_its_creators(
    standin: Callable[[Script], Server], serve: Serve, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\nbob {BOB}\n")
    script = json.loads((REPO / "examples" / "tasks-standin.json").read_text())
    model = standin(script)
    server = serve(model.url, target="examples.tasks:service", args=["--token-file", str(tokens)])
    body = {"type": "summary", "instructions": "Summarise ankka.", "instance": "inbox"}

    def call(method: str, path: str, token: str | None, **kw: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30, **kw)

    anonymous = call("PUT", "/v1/agents/researcher/tasks/t1", None, json=body)
    created = call("PUT", "/v1/agents/researcher/tasks/t1", ALICE, json=body)
    taken = call("PUT", "/v1/agents/researcher/tasks/t1", BOB, json=body)
    peeked = call("GET", "/v1/tasks/t1", BOB)
    cancelled = call("POST", "/v1/tasks/t1/cancel", BOB)
    followed = call("GET", "/v1/tasks/t1/notifications", BOB)
    final = call("GET", "/v1/tasks/t1", ALICE, params={"wait": 20}).json()
    read_by_bob = call("GET", "/v1/sessions/task:t1/messages", BOB)
    read_by_alice = call("GET", "/v1/sessions/task:t1/messages", ALICE)
    bad_id = call("GET", "/v1/tasks/no%20spaces", ALICE)

    assert anonymous.status_code == 401
    assert created.status_code == 201, created.text
    for refused in (taken, peeked, cancelled, followed):
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["type"] == "not_permitted"
    assert final["state"] == "completed" and final["created_by"] == "alice"
    assert read_by_bob.status_code == 403
    assert read_by_alice.status_code == 200 and read_by_alice.json()["messages"]
    assert bad_id.status_code == 422 and "not a valid id" in bad_id.json()["error"]["message"]
    assert ALICE not in server.stop()
