"""The task API of ``ankka serve`` over real HTTP, with the stand-in as the model."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script, received
from tests.support.processes import REPO, Server

pytestmark = pytest.mark.integration

TASKS_SCRIPT = json.loads((REPO / "examples" / "tasks-standin.json").read_text())
TARGET = "examples.tasks:service"
BODY = {"type": "summary", "instructions": "Summarise ankka."}


def put(server: Server, task: str, body: dict[str, Any] | None = None) -> httpx.Response:
    return httpx.put(
        f"{server.url}/v1/agents/researcher/tasks/{task}", json=body or BODY, timeout=30
    )


def read_events(server: Server, path: str, *, until: str) -> list[tuple[str, dict[str, Any]]]:
    seen: list[tuple[str, dict[str, Any]]] = []
    with httpx.stream("GET", f"{server.url}{path}", timeout=30) as answer:
        assert answer.status_code == 200, answer.read()
        event = ""
        for line in answer.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                seen.append((event, json.loads(line.removeprefix("data: "))))
                if event == until:
                    break
    return seen


def test_a_task_is_created_once_and_read_with_its_typed_result(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin(TASKS_SCRIPT)
    server = serve(model.url, target=TARGET)
    created = put(server, "t1")
    assert created.status_code == 201, created.text
    assert created.json()["state"] in ("assigned", "in-progress", "completed")
    assert put(server, "t1").status_code == 200
    clash = put(server, "t1", {**BODY, "instructions": "Something else."})
    assert clash.status_code == 409
    assert clash.json()["error"]["type"] == "conflict"
    answer = httpx.get(f"{server.url}/v1/tasks/t1", params={"wait": 20}, timeout=30).json()
    assert answer["state"] == "completed", answer
    assert answer["result"] == {
        "title": "ankka",
        "points": ["ankka is an agent platform for Kubernetes, in Python."],
    }
    assert answer["iterations"] == {"used": 2, "budget": 5}
    assert answer["usage"] == {
        "input_tokens": 410,
        "output_tokens": 54,
        "cache_read_tokens": 180,
        "cache_write_tokens": 0,
    }
    assert answer["instance"] == "task.t1" and answer["depends_on"] == []
    sent = received(model)
    assert [t["function"]["name"] for t in sent[0]["body"]["tools"]] == [
        "lookup",
        "complete_task",
        "fail_task",
    ]
    assert sent[1]["body"]["messages"][-1]["content"] == (
        "ankka is an agent platform for Kubernetes, in Python."
    )
    history = httpx.get(f"{server.url}/v1/sessions/task:t1/messages").json()["messages"]
    assert [m["role"] for m in history] == ["assistant", "tool", "assistant", "tool"]
    # Every model call a task made is in /metrics too, with its tokens.
    metrics = httpx.get(f"{server.url}/metrics").text
    calls = [
        line
        for line in metrics.splitlines()
        if line.startswith("ankka_model_calls_total{") and 'agent="researcher"' in line
    ]
    assert len(calls) == 1 and calls[0].endswith(" 2.0"), calls
    assert 'ankka_tokens_total{agent="researcher"' in metrics


def test_bad_task_requests_are_named(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    server = serve(standin([]).url, target=TARGET)
    unknown_type = put(server, "t1", {"type": "poem", "instructions": "x"})
    assert unknown_type.status_code == 422
    assert "does not accept task type 'poem'" in unknown_type.json()["error"]["message"]
    missing = put(server, "t2", {"type": "summary"})
    assert missing.status_code == 422 and "instructions" in missing.json()["error"]["message"]
    ghost = put(server, "t3", {**BODY, "depends_on": ["ghost"]})
    assert ghost.status_code == 422 and "'ghost'" in ghost.json()["error"]["message"]
    nobody = httpx.put(f"{server.url}/v1/agents/nobody/tasks/t4", json=BODY)
    assert nobody.status_code == 404
    assert httpx.get(f"{server.url}/v1/tasks/none").status_code == 404
    bad_wait = httpx.get(f"{server.url}/v1/tasks/none", params={"wait": "soon"})
    assert bad_wait.status_code == 422


def test_a_task_s_notifications_open_with_a_snapshot_then_follow_it_live(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    slow = [{**turn, "delay_ms": 400} for turn in TASKS_SCRIPT]
    server = serve(standin(slow).url, target=TARGET)
    assert put(server, "t1").status_code == 201
    seen = read_events(server, "/v1/tasks/t1/notifications", until="task_completed")
    assert seen[0][0] == "snapshot" and seen[0][1]["id"] == "t1"
    events = [e for e, _ in seen[1:]]
    assert events[-1] == "task_completed"
    assert "iteration_completed" in events
    numbers = [d["number"] for _, d in seen[1:]]
    assert numbers == sorted(numbers)


def test_instances_are_suspended_resumed_and_read(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    slow = [{**turn, "delay_ms": 300} for turn in TASKS_SCRIPT]
    server = serve(standin(slow).url, target=TARGET)
    assert put(server, "t1", {**BODY, "instance": "desk"}).status_code == 201
    base = f"{server.url}/v1/agents/researcher/instances/desk"
    suspended = httpx.post(f"{base}/suspend").json()
    assert suspended["state"] == "suspended"
    assert [q["task"] for q in suspended["queue"]] == ["t1"]
    assert httpx.get(base).json()["state"] == "suspended"
    assert httpx.post(f"{base}/resume").json()["state"] == "active"
    done = httpx.get(f"{server.url}/v1/tasks/t1", params={"wait": 20}, timeout=30).json()
    assert done["state"] == "completed"
    assert httpx.post(f"{base}/fly").status_code == 422
    cancel = httpx.post(f"{server.url}/v1/tasks/t1/cancel").json()
    assert cancel["state"] == "completed"  # final states never change


def test_wait_ends_a_notification_stream_and_the_document_lists_the_streams(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    server = serve(standin(TASKS_SCRIPT).url, target=TARGET)
    assert put(server, "t1", {**BODY, "instance": "desk"}).status_code == 201
    done = httpx.get(f"{server.url}/v1/tasks/t1", params={"wait": 20}, timeout=30).json()
    assert done["state"] == "completed"
    # An instance's stream never ends by itself; with ?wait= it ends after the snapshot.
    path = "/v1/agents/researcher/instances/desk/notifications"
    with httpx.stream("GET", f"{server.url}{path}", params={"wait": 0.2}, timeout=30) as answer:
        assert answer.status_code == 200
        lines = list(answer.iter_lines())  # returns: the server ended the stream
    assert "event: snapshot" in lines
    bad = httpx.get(f"{server.url}{path}", params={"wait": "soon"}, timeout=30)
    assert bad.status_code == 422 and "wait" in bad.json()["error"]["message"]
    paths = httpx.get(f"{server.url}/openapi.json").json()["paths"]
    for listed in (
        "/v1/tasks/{task}/notifications",
        "/v1/agents/{agent}/instances/{instance}/notifications",
        "/v1/approvals",
        "/v1/approvals/{approval}",
    ):
        assert listed in paths
