"""Delegating to an agent of another platform over A2A: ``ankka serve examples.team:service``
whose ``researcher`` is a remote A2A agent (``ANKKA_A2A_REMOTE_RESEARCHER_CARD_URL``), an agent
built with the official a2a-sdk alone (a real server process). Each summary is one message to
it, followed to its end and told to the lead once; SIGKILLed while it waits, the lead's
runtime follows the same A2A tasks again without sending a message twice. Delegating to another
``ankka serve`` over A2A, the lead's notification stream carries the children's own A2A updates,
relayed live."""

from __future__ import annotations

import copy
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
from tests.integration.test_delegation import CHILDREN, REPORT, STANDIN, told
from tests.integration.test_delegation_across import free_port, notifications
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


def ankka_peer(servers: list[Server], model: Server, store: Path) -> Server:
    """Another ``ankka serve`` of the team: its researcher is the lead's remote A2A agent."""
    command = ankka_command(
        "serve", "examples.team:service", "--port", "0", "--store", f"sqlite:///{store}"
    )
    servers.append(start(command, env=model_env(model.url)))
    return servers[-1]


def test_a_parents_stream_carries_its_a2a_childrens_own_updates_relayed_once(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    """Two real runtimes on loopback: the lead's delegates its summaries to the researcher
    another ``ankka serve`` serves over A2A. A stream of r1 opened before the lead delegates
    hears each child's A2A updates (its result as an artifact, before it ends), marked
    ``remote`` with an ``event_id`` of the child's and the event's, none twice, and each
    child's end exactly once, after its own updates."""
    script = copy.deepcopy(STANDIN)
    script[0]["delay_ms"] = 3000  # subscribed before the lead delegates
    for index in (1, 2, 3, 4):  # the researcher's calls: the children are subscribed to by then
        script[index]["delay_ms"] = 2000
    model = standin(script)
    peer = ankka_peer(servers, model, tmp_path / "researcher.sqlite3")
    card = f"{peer.url}/a2a/researcher/.well-known/agent-card.json"
    at_peer = {"ANKKA_A2A_REMOTE_RESEARCHER_CARD_URL": card}  # not the host root's: two agents
    server = lead(servers, model, peer, tmp_path / "lead.sqlite3", at_peer)
    with httpx.Client(timeout=120) as client:
        answer = client.put(f"{server.url}/v1/agents/lead/tasks/r1", json=REPORT)
        assert answer.status_code == 201, answer.text
        seen = notifications(client, server, "r1")
    report = wait_final(server, ["r1"])["r1"]
    assert report["state"] == "completed", dump(report)
    assert sorted((r["status"], r["task"]) for r in told(server, "r1")) == [
        ("completed", c) for c in CHILDREN
    ]
    relayed = [d for d in seen if d.get("remote") == "researcher" and "end" not in d]
    for child, topic in zip(CHILDREN, ("sqlite", "postgresql"), strict=True):
        own = [d for d in seen if d.get("task") == child]
        mine = [d for d in relayed if d["task"] == child]
        artifacts = [d for d in mine if d["event"] == "task_artifact"]
        assert len(artifacts) == 1, dump(seen)  # the child's result, as the agent streamed it
        assert f'"title": "{topic}"' in artifacts[0]["text"], dump(artifacts)
        assert artifacts[0]["last_chunk"] is True
        # Nothing after its artifact but its end: its state changes came before (those the
        # relay was subscribed for).
        assert {d["event"] for d in mine} <= {"task_assigned", "task_started", "task_artifact"}
        assert mine[-1] is artifacts[0], dump(mine)
        ends_ = [d for d in own if "end" in d]
        assert [(d["event"], d["agent"], d["event_id"], d["remote"]) for d in ends_] == [
            ("task_completed", "researcher", f"{child}/end", "researcher")
        ], dump(own)
        assert own[-1] is ends_[0], dump(own)  # its end is the last of its events
    assert {d["agent"] for d in relayed} == {"researcher"}
    assert all(d["event_id"].startswith(f"{d['task']}/{d['event']}/") for d in relayed)
    ids = [d["event_id"] for d in relayed]
    assert len(ids) == len(set(ids)), dump(relayed)
