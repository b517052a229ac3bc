"""Delegating to an agent of another platform over A2A: ``ankka serve examples.team:service``
whose ``researcher`` is a remote A2A agent (``ANKKA_A2A_REMOTE_RESEARCHER_CARD_URL``), an agent
built with the official a2a-sdk alone (a real server process). Each summary is one message to
it, followed to its end and told to the lead once; SIGKILLed while it waits, the lead's
runtime follows the same A2A tasks again without sending a message twice."""

from __future__ import annotations

import secrets
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script, model_env
from tests.integration.tasks_crash import asked_keys, dump, model_requests, wait_final
from tests.integration.test_delegation import REPORT, STANDIN, told
from tests.integration.test_delegation_across import free_port
from tests.support.eventually import eventually
from tests.support.jaeger import Jaeger
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

SCRIPT = [STANDIN[0], STANDIN[-1]]  # the lead delegates both summaries, then reports


def sdk_agent(servers: list[Server], *args: str) -> Server:
    command = [sys.executable, "-m", "tests.support.a2a_sdk_server", "--port", "0", *args]
    servers.append(start(command))
    return servers[-1]


def lead(
    servers: list[Server],
    model: Server,
    agent: Server,
    store: Path,
    env: dict[str, str] | None = None,
) -> Server:
    command = ankka_command(
        "serve", "examples.team:service", "--port", "0", "--store", f"sqlite:///{store}"
    )
    card = f"{agent.url}/.well-known/agent-card.json"
    extra = {**model_env(model.url), "ANKKA_A2A_REMOTE_RESEARCHER_CARD_URL": card, **(env or {})}
    servers.append(start(command, env=extra))
    return servers[-1]


def sent(agent: Server) -> int:
    return int(httpx.get(f"{agent.url}/_count").json()["messages"])


def remembered(store: Path) -> int:
    with sqlite3.connect(store) as db:
        return int(db.execute("SELECT COUNT(*) FROM ankka_remote_a2a").fetchone()[0])


def check(server: Server, agent: Server, results: list[dict[str, Any]]) -> None:
    report = wait_final(server, ["r1"])["r1"]
    assert report["state"] == "completed", dump(report)
    assert report["children"] == ["r1:1.0", "r1:1.1"]
    assert sorted((r["status"], r["task"], r["result"]) for r in results) == [
        ("completed", "r1:1.0", "echo: Summarise sqlite."),
        ("completed", "r1:1.1", "echo: Summarise postgresql."),
    ], dump(results)  # each told once, with what the remote agent answered
    assert report["tree_iterations"] == 2  # what the remote spent is not known over A2A
    assert sent(agent) == 2  # one message per child


def test_a_lead_delegates_its_summaries_to_an_a2a_sdk_agent(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model, agent = standin(SCRIPT), sdk_agent(servers, "--delay", "0.5")
    server = lead(servers, model, agent, tmp_path / "lead.sqlite3")
    answer = httpx.put(f"{server.url}/v1/agents/lead/tasks/r1", json=REPORT, timeout=30)
    assert answer.status_code == 201, answer.text
    wait_final(server, ["r1"])
    check(server, agent, told(server, "r1"))


def test_every_request_to_the_remote_agent_carries_its_delegating_calls_context(
    standin: Callable[[Script], Server],
    servers: list[Server],
    tmp_path: Path,
    jaeger_backend: Jaeger,
) -> None:
    model, agent = standin(SCRIPT), sdk_agent(servers, "--delay", "0.5")
    server = lead(servers, model, agent, tmp_path / "lead.sqlite3", jaeger_backend.env("lead"))
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    headers = {"traceparent": f"00-{trace_id}-{caller}-01"}
    answer = httpx.put(
        f"{server.url}/v1/agents/lead/tasks/r1", json=REPORT, headers=headers, timeout=30
    )
    assert answer.status_code == 201, answer.text
    wait_final(server, ["r1"])
    check(server, agent, told(server, "r1"))
    delegate = "execute_tool delegate__researcher__summary"
    spans = jaeger_backend.trace(trace_id, names={delegate}, at_least=2)
    calls = {s.span_id for s in spans if s.name == delegate}
    assert len(calls) == 2
    heard = httpx.get(f"{agent.url}/_count").json()["traceparents"]
    assert heard, "no request to the remote agent carried a traceparent"
    # Every one in the caller's trace, the child of one of the two delegating calls.
    assert {h.split("-")[1] for h in heard} == {trace_id}
    assert {h.split("-")[2] for h in heard} == calls


def test_a_failing_remote_agent_is_a_failed_child_naming_what_it_said(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model, agent = standin(SCRIPT), sdk_agent(servers, "--fail", "sqlite")
    server = lead(servers, model, agent, tmp_path / "lead.sqlite3")
    httpx.put(f"{server.url}/v1/agents/lead/tasks/r1", json=REPORT, timeout=30)
    assert wait_final(server, ["r1"])["r1"]["state"] == "completed"
    results = {r["task"]: r for r in told(server, "r1")}
    assert results["r1:1.0"]["status"] == "failed", dump(results)
    assert "ended failed" in results["r1:1.0"]["reason"]
    assert "cannot do 'Summarise sqlite.'" in results["r1:1.0"]["reason"]
    assert results["r1:1.1"]["status"] == "completed"


def test_the_leads_runtime_killed_while_it_follows_sends_no_message_twice(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    model, agent = standin(SCRIPT), sdk_agent(servers, "--delay", "4")
    store = tmp_path / "lead.sqlite3"
    first = lead(servers, model, agent, store)
    httpx.put(f"{first.url}/v1/agents/lead/tasks/r1", json=REPORT, timeout=30)
    eventually(lambda: remembered(store) == 2, what="both A2A tasks remembered", timeout=60)
    first.process.kill()  # SIGKILL mid-wait: the remote tasks are still working
    first.process.wait()
    assert sent(agent) == 2
    second = lead(servers, model, agent, store)
    wait_final(second, ["r1"])
    check(second, agent, told(second, "r1"))
    assert asked_keys(model_requests(model)).count(("r1", 0)) == 1


def test_a_remote_task_the_agent_lost_after_taking_it_is_a_failed_child(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    port = free_port()
    model, agent = standin(SCRIPT), sdk_agent(servers, "--port", str(port), "--delay", "60")
    store = tmp_path / "lead.sqlite3"
    server = lead(servers, model, agent, store)
    httpx.put(f"{server.url}/v1/agents/lead/tasks/r1", json=REPORT, timeout=30)
    eventually(lambda: remembered(store) == 2, what="both A2A tasks remembered", timeout=60)
    agent.process.kill()  # its tasks were in memory: the agent comes back knowing none
    agent.process.wait()
    sdk_agent(servers, "--port", str(port))
    report = wait_final(server, ["r1"])["r1"]
    assert report["state"] == "completed", dump(report)  # the lead went on without them
    results = told(server, "r1")
    assert sorted((r["status"], r["task"], r.get("error")) for r in results) == [
        ("failed", "r1:1.0", "peer_lost"),
        ("failed", "r1:1.1", "peer_lost"),
    ], dump(results)
    assert all("TaskNotFoundError" in r["reason"] for r in results), dump(results)
