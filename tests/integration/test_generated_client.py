"""A client generated from the runtime's own ``/openapi.json`` drives a real ``ankka serve``:
a turn, an approval and a task (issue 32 item 3).

openapi-python-client (PyPI, pinned below) runs from a venv of its own under
``~/.cache/ankka`` (built once, about 20 s; never a dependency of ankka), reads the document a
real ``ankka serve`` answers, and writes a typed client package into the test's directory.
A script run by that venv's Python (which has what the generated client imports: httpx, attrs,
python-dateutil) then uses only the generated functions and models, and prints what each call
parsed; the test asserts on that and on what the runtime recorded. The model is the stand-in,
scripted for the three in order.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.processes import Server

pytestmark = pytest.mark.integration

GENERATOR = "openapi-python-client==0.29.1"
CACHE = Path(os.environ.get("ANKKA_CACHE", Path.home() / ".cache" / "ankka"))
VENV = CACHE / "openapi-client-venv-0.29.1"

SCRIPT: list[dict[str, Any]] = [
    {"text": "It is -3 °C with light snow in Helsinki."},
    {"tool_calls": [{"name": "refund", "arguments": {"order": "A-1042", "amount": 250.0}}]},
    {"text": "Order A-1042 was refunded 250.00."},
    {"tool_calls": [{"name": "lookup", "arguments": {"topic": "ankka"}}]},
    {
        "tool_calls": [
            {"name": "complete_task", "arguments": {"title": "ankka", "points": ["a platform"]}}
        ]
    },
]

# Only the generated package: its functions, its models, its client.
DRIVER = """
import json, sys

import httpx
from ankka_runtime_client import Client
from ankka_runtime_client.api.default import decide_approval, get_task, put_task, run_turn
from ankka_runtime_client.models import (
    Awaiting, DecisionAnswer, DecisionBody, DecisionBodyDecision, PutTaskAgent, RunTurnAgent,
    Task, TaskBody, TurnAnswer, TurnBody,
)

client = Client(base_url=sys.argv[1], raise_on_unexpected_status=True,
                timeout=httpx.Timeout(60.0))
out = {}
turn = run_turn.sync(RunTurnAgent("weather"), "client-1", client=client,
                     body=TurnBody(message="What is the weather in Helsinki?"))
assert isinstance(turn, TurnAnswer), turn
out["turn"] = {"reply": turn.reply, "calls": len(turn.model_calls), "cost": turn.cost}

waiting = run_turn.sync(RunTurnAgent("refunds"), "client-2", client=client,
                        body=TurnBody(message="Refund order A-1042, 250 euros."))
assert isinstance(waiting, Awaiting), waiting
[request] = waiting.approvals
decided = decide_approval.sync(request.id, client=client, body=DecisionBody(
    decision=DecisionBodyDecision.APPROVE, digest=request.digest))
assert isinstance(decided, DecisionAnswer), decided
out["approval"] = {"tool": request.tool, "arguments": request.arguments.to_dict()
                   if hasattr(request.arguments, "to_dict") else request.arguments,
                   "status": str(decided.status), "decided_by": decided.decided_by,
                   "reply": decided.turn.reply}

created = put_task.sync_detailed(PutTaskAgent("researcher"), "client-t1", client=client,
                                 body=TaskBody(type_="summary", instructions="Summarise ankka."))
assert isinstance(created.parsed, Task), created
done = get_task.sync("client-t1", client=client, wait=30)
assert isinstance(done, Task), done
out["task"] = {"created": int(created.status_code), "state": str(done.state),
               "result": done.result, "used": done.iterations.used,
               "created_at": done.created_at.isoformat() if done.created_at else None}
print(json.dumps(out))
"""


def _generator() -> Path:
    """The generator's venv, built once (pinned) into the shared cache."""
    program = VENV / "bin" / "openapi-python-client"
    if not program.exists():
        subprocess.run(["python3", "-m", "venv", str(VENV)], check=True, timeout=300)
        subprocess.run(
            [str(VENV / "bin" / "pip"), "install", "--quiet", GENERATOR, "python-dateutil"],
            check=True,
            timeout=900,
        )
    return program


def test_a_client_generated_from_the_document_runs_a_turn_an_approval_and_a_task(
    standin: Callable[[Any], Server], serve: Callable[..., Server], tmp_path: Path
) -> None:
    program = _generator()
    server = serve(standin(SCRIPT).url, target="tests.integration.client_services:service")
    document = tmp_path / "openapi.json"
    document.write_text(httpx.get(f"{server.url}/openapi.json", timeout=30).text)
    config = tmp_path / "generator.yaml"
    config.write_text("post_hooks: []\n")  # no formatter run over the generated code
    generate = ["generate", "--path", str(document), "--meta", "none", "--config", str(config)]
    subprocess.run(
        [str(program), *generate],
        cwd=tmp_path,
        check=True,
        timeout=300,
        capture_output=True,
    )
    assert (tmp_path / "ankka_runtime_client" / "api" / "default" / "run_turn.py").exists()
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)

    ran = subprocess.run(
        [str(VENV / "bin" / "python"), str(driver), server.url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = json.loads(ran.stdout)
    assert out["turn"] == {
        "reply": "It is -3 °C with light snow in Helsinki.",
        "calls": 1,
        "cost": "unknown",
    }
    assert out["approval"] == {
        "tool": "refund",
        "arguments": {"order": "A-1042", "amount": 250.0},
        "status": "completed",
        "decided_by": "local",
        "reply": "Order A-1042 was refunded 250.00.",
    }
    assert out["task"]["created"] == 201
    assert out["task"]["state"] == "completed"
    assert out["task"]["result"] == {"title": "ankka", "points": ["a platform"]}
    assert out["task"]["used"] == 2
    assert out["task"]["created_at"] is not None
    # What the runtime recorded of the approval, read back without the generated client.
    conversation = httpx.get(f"{server.url}/v1/sessions/client-2/messages", timeout=30).json()
    results = [m for m in conversation["messages"] if m["role"] == "tool"]
    assert [r["content"] for r in results] == ["refunded 250.00 on order A-1042"]
