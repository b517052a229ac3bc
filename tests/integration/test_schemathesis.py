"""Schemathesis against both servers, from the OpenAPI documents they publish at
``/openapi.json``: generated requests, valid and invalid, and not one 5xx (issue 13,
defect 5); and every answer as its document says: a status the operation
lists, its content type, a body that fits its schema (issue 32 item 3). Bounded: a fixed
number of examples per operation, and every stream's ``wait`` fixed at a fraction of a second
(the document gives the server's true range, 0 to 300), so the run stays short.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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


def _no_5xx(server: Server, report: Path, *, conformance: bool = False) -> None:
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
        "1",
        "--request-timeout",
        "30",
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--report-dir",
        str(report),
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
