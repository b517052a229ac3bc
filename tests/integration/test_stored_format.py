"""A store written by an older runtime opens and resumes under this one (the stored format
is a contract). The stores in ``tests/fixtures/stores`` were written by the commit their
``manifest.json`` names (``tests/fixtures/stores/build.py``), SQLite and PostgreSQL alike,
with the runtime SIGKILLed while a task's tool ran. Here a current ``ankka serve`` opens a
copy and carries on: every session reads as it was written, the suspended turns resume when
decided, and every task in flight ends, with no recorded model call asked again."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script, received
from tests.support.eventually import eventually
from tests.support.postgres import client_tool, postgres_cluster
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "stores"
TARGET = "tests.fixtures.stores.service:service"
DONE = {"name": "complete_task", "arguments": {"title": "ankka", "points": ["known"]}}

# Served in this order (the test makes the calls one after another): t-tool's call after its
# re-run lookup, t-queued's first, a new turn of s-weather, then the three resumed turns.
RESUME_SCRIPT: list[dict[str, Any]] = [
    {"when": "tool", "tool_calls": [DONE]},
    {"when": "user", "tool_calls": [DONE]},
    {"when": "user", "text": "Hello again."},
    {"when": "tool", "text": "Refunded A1."},
    {"when": "tool", "text": "Refunded A2; A3 was refused."},
    {"when": "tool", "tool_calls": [DONE]},
]


@pytest.fixture(params=["sqlite", "postgres"])
def old_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A copy of the store an older runtime left, as a store URL."""
    if request.param == "sqlite":
        path = tmp_path / "store.sqlite3"
        shutil.copyfile(FIXTURES / "main.sqlite3", path)
        yield f"sqlite:///{path}"
        return
    with postgres_cluster() as dsn:
        subprocess.run(
            [
                str(client_tool("psql")),
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                dsn,
                "-f",
                str(FIXTURES / "main.postgres.sql"),
            ],
            check=True,
            capture_output=True,
        )
        yield dsn


@pytest.fixture
def resumed(
    old_store: str, standin: Callable[[Script], Server], tmp_path: Path
) -> Iterator[tuple[Server, Server, Path]]:
    model = standin(RESUME_SCRIPT)
    log = tmp_path / "tool-runs.txt"
    env = {
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": f"{model.url}/v1",
        "ANKKA_MODEL_DEFAULT_MODEL": "standin",
        "ANKKA_MODEL_SUMMARISER_PRESET": "openai-compatible",
        "ANKKA_MODEL_SUMMARISER_URL": f"{model.url}/v1",
        "ANKKA_MODEL_SUMMARISER_MODEL": "standin",
        "ANKKA_TEST_TOOL_LOG": str(log),
    }
    # A lease left by the killed runtime has run out by now (its clock, 10 s leases).
    server = start(
        ankka_command("serve", TARGET, "--port", "0", "--store", old_store, "--lease-seconds", "1"),
        env=env,
    )
    yield server, model, log
    server.stop()


def _task(client: httpx.Client, task: str) -> dict[str, Any]:
    answer: dict[str, Any] = client.get(f"/v1/tasks/{task}").json()
    return answer


def _roles(client: httpx.Client, session: str) -> list[str]:
    messages = client.get(f"/v1/sessions/{session}/messages").json()["messages"]
    return [m["role"] for m in messages]


def _decide(client: httpx.Client, session: str, decision: str) -> httpx.Response:
    pending = client.get(f"/v1/sessions/{session}").json()["awaiting_approval"]
    assert len(pending) == 1, pending
    return client.post(
        f"/v1/approvals/{pending[0]['id']}",
        json={"decision": decision, "digest": pending[0]["digest"]},
    )


def test_a_store_written_by_the_older_runtime_resumes_every_session_and_task(
    resumed: tuple[Server, Server, Path],
) -> None:
    server, model, log = resumed
    with httpx.Client(base_url=server.url, timeout=30) as client:
        # The tasks in flight go on by themselves: t-tool re-runs the lookup whose result was
        # not recorded (at least once), then t-queued behind it on instance i1.
        for task in ("t-tool", "t-queued"):
            eventually(
                lambda task=task: _task(client, task)["state"] == "completed",  # type: ignore[misc]
                what=f"{task} completed",
                timeout=60,
            )
        assert _task(client, "t-done")["state"] == "completed"
        assert _task(client, "t-done")["result"] == {"title": "done", "points": ["it is done"]}
        assert _task(client, "t-tool")["iterations"]["used"] == 2
        assert _task(client, "t-tool")["usage"]["input_tokens"] == 11  # the recorded call's
        assert _roles(client, "task:t-tool") == ["assistant", "tool", "assistant", "tool"]
        first = next(r for r in received(model) if r["path"] == "/v1/chat/completions")
        sent = first["body"]["messages"]
        # The recorded call was not asked again: the first request carries its answer and the
        # re-run tool's result.
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"], sent
        assert sent[2]["tool_calls"][0]["function"]["name"] == "lookup"

        # The sessions read as written, with their tokens, and take new turns.
        assert _roles(client, "s-weather") == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
        ]
        weather = client.get("/v1/sessions/s-weather").json()
        assert weather["usage"]["input_tokens"] == 33, weather
        answer = client.post("/v1/agents/weather/sessions/s-weather", json={"message": "Hi"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["reply"] == "Hello again."
        long = client.get("/v1/sessions/s-long").json()
        assert long["compactions"] == 1, long
        assert _roles(client, "s-long") == ["user", "assistant", "user", "assistant"]

        # A turn suspended on one approval resumes once it is decided; so does one whose
        # first approval was decided before the older runtime stopped.
        answer = _decide(client, "s-refund", "approve")
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "completed", answer.text
        answer = _decide(client, "s-refund2", "refuse")
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "completed", answer.text
        refund2 = client.get("/v1/sessions/s-refund2/messages").json()["messages"]
        results = [m for m in refund2 if m["role"] == "tool"]
        assert [r["is_error"] for r in results] == [False, True], refund2

        # The task awaiting approval resumes too.
        assert _task(client, "t-approval")["state"] == "awaiting-approval"
        answer = _decide(client, "task:t-approval", "approve")
        assert answer.status_code == 200, answer.text
        eventually(
            lambda: _task(client, "t-approval")["state"] == "completed",
            what="t-approval completed",
            timeout=60,
        )
    runs = log.read_text().splitlines()
    assert runs.count("lookup ankka") == 1  # re-run once (its first run was cut off)
    assert runs.count("refund A1 250.0") == 1 and runs.count("refund A2 300.0") == 1
    assert "refund A3 400.0" not in runs
    assert runs.count("publish ankka") == 1
    assert json.loads((FIXTURES / "manifest.json").read_text())["written_by"]
