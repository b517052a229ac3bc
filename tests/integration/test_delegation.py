"""Delegation over real processes: ``ankka serve examples.team:service`` with the stand-in as
the model. The lead delegates two summaries, waits, and reports; SIGKILLed while its children
work, or while its own next call is in flight, a new process carries on: no child is made
twice, no child's end is lost or told twice, and no recorded model call is asked again."""

from __future__ import annotations

import copy
import json
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.integration.conftest import Script, model_env
from tests.integration.tasks_crash import (
    asked_keys,
    dump,
    model_requests,
    recorded_keys,
    wait_final,
)
from tests.support.eventually import eventually
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

STANDIN = json.loads((Path(__file__).parents[2] / "examples/team-standin.json").read_text())
REPORT = {"type": "report", "instructions": "Report on sqlite and postgresql."}
CHILDREN = ["r1:1.0", "r1:1.1"]


def serve_team(standin: Server, store: str, *, lease: float | None = None) -> Server:
    command = ankka_command("serve", "examples.team:service", "--port", "0", "--store", store)
    if lease is not None:
        command += ["--lease-seconds", str(lease)]
    return start(command, env=model_env(standin.url))


def put_report(server: Server, task: str = "r1") -> None:
    answer = httpx.put(f"{server.url}/v1/agents/lead/tasks/{task}", json=REPORT, timeout=30)
    assert answer.status_code == 201, answer.text


def tree_rows(path: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT task, parent FROM ankka_task_tree ORDER BY task").fetchall()
    return [(str(task), parent) for task, parent in rows]


def told(server: Server, task: str) -> list[dict[str, Any]]:
    """The delegation calls' results in ``task``'s session."""
    history = httpx.get(f"{server.url}/v1/sessions/task:{task}/messages", timeout=30).json()
    decoder = json.JSONDecoder()
    return [
        decoder.raw_decode(m["content"])[0]
        for m in history["messages"]
        if m["role"] == "tool" and m.get("name", "").startswith("delegate__")
    ]


def check_tree(server: Server, records: dict[str, Any]) -> None:
    lead = records["r1"]
    assert lead["state"] == "completed", dump(lead)
    assert lead["result"] == STANDIN[-1]["tool_calls"][0]["arguments"]
    assert lead["parent"] is None and lead["children"] == CHILDREN
    children = wait_final(server, CHILDREN)
    assert {c: r["state"] for c, r in children.items()} == dict.fromkeys(CHILDREN, "completed")
    assert {r["parent"] for r in children.values()} == {"r1"}
    results = told(server, "r1")
    assert sorted((r["status"], r["task"]) for r in results) == [
        ("completed", "r1:1.0"),
        ("completed", "r1:1.1"),
    ], dump(results)  # each child's end told once
    for key in lead["usage"]:
        own = lead["usage"][key] + sum(r["usage"][key] for r in children.values())
        assert lead["tree_usage"][key] == own, key  # every call counted once
    assert lead["tree_iterations"] == 6


def test_the_team_example_reports_on_two_delegated_summaries(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model = standin(STANDIN)
    server = serve_team(model, f"sqlite:///{tmp_path / 'store.sqlite3'}")
    servers.append(server)
    put_report(server)
    check_tree(server, wait_final(server, ["r1"]))
    assert len(model_requests(model)) == 6
    assert tree_rows(tmp_path / "store.sqlite3") == [
        ("r1", None),
        ("r1:1.0", "r1"),
        ("r1:1.1", "r1"),
    ]


def test_a_parents_notifications_carry_its_children_and_end_with_its_own_end(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model = standin(slowed((1, 2), 1500))  # the children's first calls take a while
    server = serve_team(model, f"sqlite:///{tmp_path / 'store.sqlite3'}")
    servers.append(server)
    put_report(server)
    seen: list[tuple[str, dict[str, Any]]] = []
    url = f"{server.url}/v1/tasks/r1/notifications"
    with httpx.stream("GET", url, timeout=60) as answer:
        assert answer.status_code == 200, answer.read()
        event = ""
        for line in answer.iter_lines():  # the server ends the stream
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                seen.append((event, json.loads(line.removeprefix("data: "))))
    ends = [(e, d["task"], d["agent"]) for e, d in seen if e == "task_completed"]
    assert sorted(ends) == [
        ("task_completed", "r1", "lead"),
        ("task_completed", "r1:1.0", "researcher"),
        ("task_completed", "r1:1.1", "researcher"),
    ], dump(seen)
    assert ends[-1] == ("task_completed", "r1", "lead")  # the stream ended with its own end


def slowed(indexes: tuple[int, ...], delay_ms: int) -> list[dict[str, Any]]:
    """The example's script with the turns at ``indexes`` answered after ``delay_ms``, those
    turns twice (a call cut off by a kill is asked again)."""
    script: list[dict[str, Any]] = copy.deepcopy(STANDIN)
    for index in indexes:
        script[index]["delay_ms"] = delay_ms
    return script + [copy.deepcopy(script[index]) for index in indexes]


def in_flight(model: Server, count: int) -> bool:
    requests = model_requests(model)
    return len(requests) >= count and any(r["answered"] is None for r in requests[count - 1 :])


@pytest.mark.parametrize(
    ("window", "slow", "asked"),
    [
        ("children's calls in flight", (1, 2), 3),
        ("the parent's next call in flight, its children ended", (5,), 6),
    ],
)
def test_a_parent_killed_mid_delegation_resumes_without_making_or_asking_anything_twice(
    standin: Callable[[Script], Server],
    servers: list[Server],
    tmp_path: Path,
    window: str,
    slow: tuple[int, ...],
    asked: int,
) -> None:
    model = standin(slowed(slow, 2000))
    path = tmp_path / "store.sqlite3"
    store = f"sqlite:///{path}"
    first = serve_team(model, store)
    servers.append(first)
    put_report(first)
    eventually(lambda: in_flight(model, asked), what=window, timeout=60)
    first.process.kill()  # SIGKILL: no shutdown, no flush
    first.process.wait()
    recorded = recorded_keys(store)
    assert ("r1", 0) in recorded  # the lead's delegating answer was recorded before the kill
    before = len(model_requests(model))
    second = serve_team(model, store)
    servers.append(second)
    check_tree(second, wait_final(second, ["r1"]))
    after = asked_keys(model_requests(model)[before:])
    again = sorted(set(after) & recorded)
    assert again == [], f"recorded calls asked again after the restart: {again}"
    every = asked_keys(model_requests(model))
    assert every.count(("r1", 0)) == 1  # the delegating call was made once
    assert sorted(t for t, _ in tree_rows(path)) == ["r1", *CHILDREN]  # each child made once


def test_on_postgresql_another_process_carries_a_killed_parents_tree_on(
    standin: Callable[[Script], Server], servers: list[Server], postgres_server: str
) -> None:
    database = f"tree_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    store = postgres_server.rsplit("/", 1)[0] + f"/{database}"
    model = standin(slowed((1, 2), 2000))
    one = serve_team(model, store, lease=2.0)
    servers.append(one)
    put_report(one)  # the lead and, once made, its children: all in the first process
    eventually(lambda: in_flight(model, 3), what="the children's calls in flight", timeout=60)
    two = serve_team(model, store, lease=2.0)
    servers.append(two)
    one.process.kill()
    one.process.wait()
    recorded = recorded_keys(store)
    before = len(model_requests(model))
    check_tree(two, wait_final(two, ["r1"], seconds=120))
    again = sorted(set(asked_keys(model_requests(model)[before:])) & recorded)
    assert again == [], f"recorded calls asked again after the kill: {again}"
    assert asked_keys(model_requests(model)).count(("r1", 0)) == 1
    with psycopg.connect(store) as conn:
        rows = conn.execute("SELECT task FROM ankka_task_tree ORDER BY task").fetchall()
    assert [r[0] for r in rows] == ["r1", *CHILDREN]
