"""Schemathesis against both servers, from the OpenAPI documents they publish at
``/openapi.json``: generated requests, valid and invalid, and not one 5xx (issue 13,
defect 5); and every answer as its document says: a status the operation
lists, its content type, a body that fits its schema (issue 32 item 3). Bounded: a fixed
number of examples per operation, and every stream's ``wait`` fixed at a fraction of a second
(the document gives the server's true range, 0 to 300), so the run stays short.

And as two callers (issue 31): the runtime with ``--token-file`` run through by alice and by
bob, each with its own seed, after alice made a session waiting for her approval and a task
of her own; no answer to one carries an id of a session, task or approval the other made
(unless that caller's own request named it: a refusal may say which id it refused).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
import yaml

from tests.integration.conftest import model_env
from tests.support.eventually import eventually
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

_EXAMPLES = 40  # per operation; with ~6 operations a server's run takes seconds


# A stream ends by itself only with its task (an instance's and the approvals' never do): every
# generated request to one waits this long at most.
_CONFIG = """
[parameters]
"query.wait" = 0.1
"""
_CONFORMANCE = "status_code_conformance,content_type_conformance,response_schema_conformance"


def _wait_ready(server: Server) -> None:
    """Until /readyz answers 200 (a 503 while the model is probed would count as a 5xx)."""
    eventually(
        lambda: httpx.get(f"{server.url}/readyz").status_code == 200,
        what=f"{server.url}/readyz to answer 200",
        timeout=20,
    )


@pytest.fixture(scope="module")
def gateway_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("schemathesis-gateway")
    script = work / "script.json"
    # No turns: whatever passes the gateway's checks is answered 418 by the stand-in.
    script.write_text(
        json.dumps({"turns": [], "models": {"small": {"capabilities": ["completion"]}}})
    )
    standin = start(ankka_command("standin", "--script", str(script), "--port", "0"))
    models = work / "models.yaml"
    models.write_text(
        yaml.safe_dump({"models": [{"name": "small", "kind": "ollama", "url": standin.url}]})
    )
    gateway = start(
        ankka_command(
            "gateway", "--models", str(models), "--insecure", "--host", "127.0.0.1", "--port", "0"
        )
    )
    try:
        _wait_ready(gateway)
        yield gateway
    finally:
        gateway.stop()
        standin.stop()


@pytest.fixture(scope="module")
def runtime_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("schemathesis-runtime")
    # Enough turns for every generated request that reaches a model; the text also decodes
    # as the typed agent's answer, so every agent of the test service can finish a turn.
    answer = json.dumps({"city": "Oslo", "celsius": 3.5})
    script = work / "script.json"
    script.write_text(json.dumps([{"text": answer}] * 2000))
    standin = start(ankka_command("standin", "--script", str(script), "--port", "0"))
    runtime = start(
        ankka_command(
            "serve", "tests.integration.services:unjudged", "--port", "0",
            "--store", f"sqlite:///{work / 'sessions.sqlite3'}",
        ),
        env=model_env(standin.url),
    )  # fmt: skip
    try:
        _wait_ready(runtime)
        yield runtime
    finally:
        runtime.stop()
        standin.stop()


_TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789ab"}
# The made ids of a caller: the sessions it sent a turn and the tasks it put, answered 2xx.
_ALICES: set[str] = set()  # the ids alice made before the runs
_MADE = re.compile(r"^/v1/agents/[^/]+/(?:sessions|tasks)/([^/?]+)$")


@pytest.fixture(scope="module")
def two_callers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The runtime with callers alice and bob (``--token-file``), alice's session waiting for
    her approval and her task made before either run; its id and the approval's in ``made``."""
    work = tmp_path_factory.mktemp("schemathesis-callers")
    refund = {"tool_calls": [{"name": "refund", "arguments": {"order": "A1", "amount": 250}}]}
    script = work / "script.json"
    script.write_text(json.dumps([refund] + [{"text": "Done."}] * 4000))
    tokens = work / "tokens"
    tokens.write_text("".join(f"{name} {token}\n" for name, token in _TOKENS.items()))
    standin = start(ankka_command("standin", "--script", str(script), "--port", "0"))
    runtime = start(
        ankka_command(
            "serve", "tests.integration.approval_services:service", "--port", "0",
            "--store", f"sqlite:///{work / 'sessions.sqlite3'}", "--token-file", str(tokens),
        ),
        env=model_env(standin.url),
    )  # fmt: skip
    try:
        eventually(
            lambda: _as("alice", runtime, "GET", "/readyz").status_code == 200,
            what=f"{runtime.url}/readyz to answer 200",
            timeout=20,
        )
        said = _as("alice", runtime, "POST", "/v1/agents/refunds/sessions/alice-private-session",
                   json={"message": "Refund A1."})  # fmt: skip
        assert said.status_code == 202, said.text
        _ALICES.update(a["id"] for a in said.json()["approvals"])
        put = _as("alice", runtime, "PUT", "/v1/agents/researcher/tasks/alice-private-task",
                  json={"type": "summary", "instructions": "Summarise ankka."})  # fmt: skip
        assert put.status_code == 201, put.text
        _ALICES.update(("alice-private-session", "alice-private-task"))
        yield runtime
    finally:
        runtime.stop()
        standin.stop()


def _as(caller: str, server: Server, method: str, path: str, **kw: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {_TOKENS[caller]}"}
    return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30, **kw)


def _exchanges(report: Path) -> list[tuple[str, str, int, str]]:
    """Each request and answer of a run's HAR report: (method, the path and query and the
    request's body, status, the answer's body)."""
    [har] = report.glob("har-*.json")
    out = []
    for entry in json.loads(har.read_text())["log"]["entries"]:
        request, response = entry["request"], entry["response"]
        asked = unquote(request["url"].split("://", 1)[1].split("/", 1)[1])
        asked = f"/{asked} {unquote((request.get('postData') or {}).get('text', ''))}"
        out.append((request["method"], asked, response["status"], response["content"]["text"]))
    return out


def _made(exchanges: Sequence[tuple[str, str, int, str]]) -> set[str]:
    made = set()
    for method, asked, status, _ in exchanges:
        found = _MADE.match(asked.split(" ", 1)[0].split("?", 1)[0])
        if method in ("POST", "PUT") and 200 <= status < 300 and found:
            made.add(found.group(1))
    return made


def _no_5xx(
    server: Server,
    report: Path,
    *,
    conformance: bool = False,
    seed: int = 1,
    extra: Sequence[str] = (),
) -> None:
    """Run schemathesis's every phase (explicit examples, coverage of each field's edge and
    wrong-typed values, fuzzing) with the zero-5xx check (and, with ``conformance``, the
    answers against the document); fail showing what it found."""
    config = report / "schemathesis.toml"
    config.write_text(_CONFIG)
    checks = f"not_a_server_error,{_CONFORMANCE}" if conformance else "not_a_server_error"
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(config),
        "run",
        f"{server.url}/openapi.json",
        "--checks",
        checks,
        "--max-examples",
        str(_EXAMPLES),
        "--phases",
        "examples,coverage,fuzzing",
        "--seed",
        str(seed),
        "--request-timeout",
        "30",
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--report-dir",
        str(report),
        *extra,
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=300, check=False, cwd=report
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_the_gateway_answers_no_generated_request_with_a_5xx_and_every_answer_as_documented(
    gateway_server: Server, tmp_path: Path
) -> None:
    _no_5xx(gateway_server, tmp_path, conformance=True)


def test_the_runtime_answers_no_generated_request_with_a_5xx_and_every_answer_as_documented(
    runtime_server: Server, tmp_path: Path
) -> None:
    _no_5xx(runtime_server, tmp_path, conformance=True)


def test_as_two_callers_no_answer_to_one_carries_an_id_the_other_made(
    two_callers: Server, tmp_path: Path
) -> None:
    runs = {}
    for seed, caller in enumerate(("alice", "bob"), 1):
        report = tmp_path / caller
        report.mkdir()
        auth = f"Authorization: Bearer {_TOKENS[caller]}"
        extra = ("--header", auth, "--report", "har")
        _no_5xx(two_callers, report, conformance=True, seed=seed + 1, extra=extra)
        runs[caller] = _exchanges(report)
    made = {caller: _made(exchanges) for caller, exchanges in runs.items()}
    assert len(_ALICES) == 3
    made["alice"] |= _ALICES
    assert made["bob"], "bob's run made no session or task of its own"
    for caller, other in (("alice", "bob"), ("bob", "alice")):
        theirs = {i for i in made[other] - made[caller] if len(i) >= 4}
        for method, asked, status, body in runs[caller]:
            for found in theirs:
                if found in asked:
                    continue  # the caller's own request named it: an answer may echo it
                assert f'"{found}"' not in body and f"'{found}'" not in body, (
                    f"{caller}'s {method} {asked[:200]} ({status}) carries {other}'s {found!r}"
                )
