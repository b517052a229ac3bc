"""Crash windows over real processes: ``ankka serve`` SIGKILLed and started again on the same
store, with the stand-in as the model. Each run: 20 tasks; every task ends; the stand-in's
request log shows no recorded call asked again; every tool ran at least once; nothing recorded
is lost."""

from __future__ import annotations

import itertools
import json
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.integration.conftest import Script
from tests.integration.tasks_crash import (
    asked_keys,
    dump,
    model_requests,
    put_tasks,
    recorded_keys,
    script,
    serve_tasks,
    tool_runs,
    wait_final,
    wait_until,
)
from tests.support.processes import Server

pytestmark = pytest.mark.integration

TASKS = [f"t{n:02d}" for n in range(20)]
BODY = {"type": "summary", "instructions": "Summarise ankka."}


def kill(server: Server) -> None:
    server.process.kill()  # SIGKILL: no shutdown, no flush, no goodbye
    server.process.wait()


def check_nothing_asked_twice(
    recorded_at_kill: set[tuple[str, int]], requests: list[dict[str, Any]], asked_before: int
) -> None:
    after = asked_keys(requests[asked_before:])
    repeated = sorted(set(after) & recorded_at_kill)
    assert repeated == [], f"recorded calls asked again after the restart: {repeated}"


def check_every_task_whole(records: dict[str, Any], state: str = "completed") -> None:
    assert {t: r["state"] for t, r in records.items()} == dict.fromkeys(records, state), dump(
        records
    )


def run_crash_window(
    standin: Callable[[Script], Server],
    servers: list[Server],
    tmp_path: Path,
    *,
    delay_ms: int,
    tool_seconds: float,
    kill_when: Callable[[Server, Path], bool],
) -> None:
    model = standin(script(len(TASKS), delay_ms=delay_ms))
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    log = tmp_path / "tool-runs.txt"
    env = {"ANKKA_TEST_TOOL_LOG": str(log), "ANKKA_TEST_TOOL_SECONDS": str(tool_seconds)}
    first = serve_tasks(model, store, env=env)
    servers.append(first)
    put_tasks(first, dict.fromkeys(TASKS, BODY))
    wait_until(lambda: kill_when(model, log), "the crash window")
    kill(first)
    recorded = recorded_keys(store)
    asked_before = len(model_requests(model))
    second = serve_tasks(model, store, env=env)
    servers.append(second)
    records = wait_final(second, TASKS)
    check_every_task_whole(records)
    check_nothing_asked_twice(recorded, model_requests(model), asked_before)
    assert tool_runs(log) >= len(TASKS)
    for task in TASKS:
        history = httpx.get(f"{second.url}/v1/sessions/task:{task}/messages").json()
        assert [m["role"] for m in history["messages"]] == [
            "assistant",
            "tool",
            "assistant",
            "tool",
        ], task
        assert records[task]["iterations"]["used"] == 2
        assert records[task]["usage"]["input_tokens"] == 30  # each call counted once


def test_a_kill_while_model_calls_are_in_flight(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    def in_flight(model: Server, log: Path) -> bool:
        requests = model_requests(model)
        return len(requests) >= 25 and any(r["answered"] is None for r in requests)

    run_crash_window(standin, servers, tmp_path, delay_ms=300, tool_seconds=0, kill_when=in_flight)


def test_a_kill_after_responses_are_recorded_and_before_their_tool_results(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    def tools_running(model: Server, log: Path) -> bool:
        return tool_runs(log) >= 10

    run_crash_window(
        standin, servers, tmp_path, delay_ms=0, tool_seconds=2.0, kill_when=tools_running
    )


def test_a_kill_in_the_middle_of_three_level_cancellation_cascades(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    # Five roots that fail, each with a chain of three dependants: 20 tasks.
    fail = {
        "when": "user",
        "tool_calls": [{"name": "fail_task", "arguments": {"reason": "nothing to say"}}],
        "delay_ms": 400,
    }
    model = standin([fail] * 10)
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    first = serve_tasks(model, store)
    servers.append(first)
    bodies: dict[str, dict[str, Any]] = {}
    for root in range(5):
        chain = [f"r{root}", f"r{root}.a", f"r{root}.b", f"r{root}.c"]
        bodies[chain[0]] = BODY
        for parent, child in itertools.pairwise(chain):
            bodies[child] = {**BODY, "depends_on": [parent]}
    put_tasks(first, bodies)
    wait_until(lambda: len(model_requests(model)) >= 3, "some roots failing")
    kill(first)
    recorded = recorded_keys(store)
    asked_before = len(model_requests(model))
    second = serve_tasks(model, store)
    servers.append(second)
    records = wait_final(second, bodies)
    roots = {t: r for t, r in records.items() if "." not in t}
    dependants = {t: r for t, r in records.items() if "." in t}
    check_every_task_whole(roots, "failed")
    check_every_task_whole(dependants, "cancelled")
    assert all(r["iterations"]["used"] == 0 for r in dependants.values())
    check_nothing_asked_twice(recorded, model_requests(model), asked_before)
    assert len(asked_keys(model_requests(model))) <= 10


def test_a_kill_while_a_subscriber_is_connected(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model = standin(script(len(TASKS), delay_ms=200))
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    first = serve_tasks(model, store)
    servers.append(first)
    bodies = {t: {**BODY, "instance": "desk"} for t in TASKS}
    put_tasks(first, bodies)
    seen: list[str] = []

    def subscribe() -> None:
        url = f"{first.url}/v1/agents/researcher/instances/desk/notifications"
        try:
            with httpx.stream("GET", url, timeout=60) as answer:
                for line in answer.iter_lines():
                    if line.startswith("event: "):
                        seen.append(line.removeprefix("event: "))
        except httpx.HTTPError:
            seen.append("<connection lost>")

    reader = threading.Thread(target=subscribe, daemon=True)
    reader.start()
    wait_until(lambda: seen.count("iteration_completed") >= 3, "the subscriber hearing work")
    kill(first)
    reader.join(timeout=30)
    assert seen[0] == "snapshot" and seen[-1] == "<connection lost>"
    recorded = recorded_keys(store)
    asked_before = len(model_requests(model))
    second = serve_tasks(model, store)
    servers.append(second)
    check_every_task_whole(wait_final(second, TASKS))
    check_nothing_asked_twice(recorded, model_requests(model), asked_before)


def test_on_sqlite_a_restart_resumes_without_waiting_out_the_killed_process_s_leases(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    # Both processes take hour-long leases: had the restarted one waited for the killed one's
    # to run out, no task would end within wait_final's 90 s. On SQLite one process owns the
    # file, so its leases are its own across restarts (docs/tasks.md).
    tasks = TASKS[:2]
    model = standin(script(len(tasks), delay_ms=300))
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    first = serve_tasks(model, store, lease=3600.0)
    servers.append(first)
    put_tasks(first, dict.fromkeys(tasks, BODY))

    def in_flight() -> bool:
        return any(r["answered"] is None for r in model_requests(model))

    wait_until(in_flight, "a model call in flight")
    kill(first)
    held = _sqlite_lease_untils(tmp_path / "store.sqlite3")
    assert held and all(until > time.time() + 3000 for until in held), held
    recorded = recorded_keys(store)
    asked_before = len(model_requests(model))
    second = serve_tasks(model, store, lease=3600.0)
    servers.append(second)
    check_every_task_whole(wait_final(second, tasks))
    assert len(model_requests(model)) > asked_before  # resumed by model calls of its own
    check_nothing_asked_twice(recorded, model_requests(model), asked_before)


def _sqlite_lease_untils(path: Path) -> list[float]:
    """The killed process's instance leases, read from the file with no runtime on it."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT lease_until FROM ankka_instances WHERE lease_owner IS NOT NULL"
        ).fetchall()
    return [float(r[0]) for r in rows]


def test_on_postgresql_another_process_takes_over_a_killed_one_s_instances(
    standin: Callable[[Script], Server], servers: list[Server], postgres_server: str
) -> None:
    database = f"takeover_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    store = postgres_server.rsplit("/", 1)[0] + f"/{database}"
    model = standin(script(len(TASKS), delay_ms=300))
    # Each process runs at most 10 instances at once, so the 20 tasks' instances are shared.
    one = serve_tasks(model, store, lease=2.0, max_instances=10)
    two = serve_tasks(model, store, lease=2.0, max_instances=10)
    servers.extend([one, two])
    put_tasks(one, dict.fromkeys(TASKS, BODY))
    # Both processes hold instances (the second may start claiming a little later under load).
    wait_until(lambda: len(_lease_owners(store)) == 2, "both processes holding instances")
    wait_until(lambda: len(model_requests(model)) >= 15, "both processes working")
    owners = _lease_owners(store)
    assert len(owners) == 2, f"the instances were not shared by both processes: {owners}"
    kill(one)
    recorded = recorded_keys(store)
    asked_before = len(model_requests(model))
    records = wait_final(two, TASKS)
    check_every_task_whole(records)
    check_nothing_asked_twice(recorded, model_requests(model), asked_before)


def _lease_owners(store: str) -> set[str]:
    with psycopg.connect(store) as conn:
        rows = conn.execute(
            "SELECT DISTINCT lease_owner FROM ankka_instances WHERE lease_owner IS NOT NULL"
        ).fetchall()
    return {r[0] for r in rows}


def test_a_subscriber_that_never_reads_is_told_what_it_dropped(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    # Enough events (five iterations for each of 60 tasks, one instance working them in turn)
    # to fill what the kernel and the server's transport hold for a reader that never reads
    # (about 120 KB with the reader's small window and segments), then its buffer of 16.
    count = 60
    lookup, done = ({k: v for k, v in turn.items() if k != "when"} for turn in script(1)[:2])
    # Four lookups of four topics (the same call asked for three times would end the task).
    lookups = [
        {**lookup, "tool_calls": [{"name": "lookup", "arguments": {"topic": f"topic {n}"}}]}
        for n in range(4)
    ]
    model = standin([*lookups, done] * count)
    server = serve_tasks(model, f"sqlite:///{tmp_path / 'store.sqlite3'}", buffer=16)
    servers.append(server)
    put_tasks(server, {"first": {**BODY, "instance": "desk"}})
    wait_final(server, ["first"])
    host, port = server.url.removeprefix("http://").split(":")
    idle = socket.socket()
    idle.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    # Small segments keep the kernel from sizing a megabyte send buffer for this reader.
    idle.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    idle.connect((host, int(port)))
    path = "/v1/agents/researcher/instances/desk/notifications"
    idle.sendall(f"GET {path} HTTP/1.1\r\nhost: {host}\r\n\r\n".encode())
    try:
        tasks = {f"n{n:03d}": {**BODY, "instance": "desk"} for n in range(count - 1)}
        put_tasks(server, tasks)
        records = wait_final(server, tasks)
        check_every_task_whole(records)
        idle.settimeout(10)
        received = b""
        marker = b"event: dropped\ndata: "
        # What was buffered, then the whole drop event: its line may come in a later segment.
        while marker not in received or b"\n" not in received.split(marker, 1)[1]:
            chunk = idle.recv(65536)
            assert chunk, "the stream ended without a whole dropped event"
            received += chunk
        dropped = received.split(marker, 1)[1].split(b"\n", 1)[0]
        assert json.loads(dropped)["count"] > 0
        # The instance went on at its own pace: every task ended, each with its 5 iterations.
        assert {r["iterations"]["used"] for r in records.values()} == {5}
    finally:
        idle.close()
