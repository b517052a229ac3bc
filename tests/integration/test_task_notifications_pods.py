"""A task's notifications reach a subscriber connected to any of the processes on one
PostgreSQL store, not only the one running the task, and its stream ends after the task's
final event there too (issue 31, item 14)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import psycopg
import pytest

from tests.integration.conftest import Script
from tests.support.eventually import eventually_async
from tests.support.processes import Server

pytestmark = pytest.mark.integration

TARGET = "tests.integration.task_services:service"
LOOKUP = {"name": "lookup", "arguments": {"topic": "ankka"}}
DONE = {"name": "complete_task", "arguments": {"title": "ankka", "points": ["known"]}}


def _owner_pid(store: str, instance: str) -> int | None:
    with psycopg.connect(store, autocommit=True) as conn:
        row = conn.execute(
            "SELECT lease_owner FROM ankka_instances WHERE id = %s", (instance,)
        ).fetchone()
    if row is None or row[0] is None:
        return None
    return int(str(row[0]).split(":")[1])  # HOST:PID:NONCE


async def _follow(url: str, until: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Every event of the stream at ``url``, until the server ends it (or, for a stream that
    never ends by itself, until event ``until``)."""
    seen: list[tuple[str, dict[str, Any]]] = []
    async with (
        httpx.AsyncClient(timeout=180) as client,
        client.stream("GET", url, params={"wait": 120}) as answer,
    ):
        assert answer.status_code == 200, await answer.aread()
        event = ""
        async for line in answer.aiter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                seen.append((event, json.loads(line.removeprefix("data: "))))
                if event == until:
                    break
    return seen


async def test_a_subscriber_on_another_process_follows_the_task_to_its_end(
    standin: Callable[[Script], Server], serve: Callable[..., Server], postgres_server: str
) -> None:
    name = f"notices_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(postgres_server, autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {name}")
    store = postgres_server.rsplit("/", 1)[0] + f"/{name}"
    model = standin(
        [
            {"tool_calls": [LOOKUP], "delay_ms": 4000},  # time for the subscriber to arrive
            {"tool_calls": [LOOKUP], "delay_ms": 500},
            {"tool_calls": [DONE]},
        ]
    )
    pods = [serve(model.url, store=store, target=TARGET) for _ in range(2)]
    body = {"type": "summary", "instructions": "Summarise ankka.", "instance": "desk"}
    async with httpx.AsyncClient(timeout=30) as client:
        created = await client.put(f"{pods[0].url}/v1/agents/researcher/tasks/t1", json=body)
    assert created.status_code == 201, created.text
    owner = await eventually_async(
        lambda: asyncio.to_thread(_owner_pid, store, "desk"), what="an owner took the instance"
    )
    (other,) = [p for p in pods if p.process.pid != owner]
    task, instance = await asyncio.gather(
        _follow(f"{other.url}/v1/tasks/t1/notifications"),
        _follow(f"{other.url}/v1/agents/researcher/instances/desk/notifications", "task_completed"),
    )
    events = [event for event, _ in task]
    assert events[0] == "snapshot"
    assert events.count("iteration_completed") == 3, events  # live, from the owner
    assert events[-1] == "task_completed", events  # and the stream ended after it
    started = [d["iteration"] for e, d in task if e == "iteration_started"]
    assert started[-2:] == [2, 3], started  # the first may have started before the stream
    assert all(d["task"] == "t1" for _, d in task[1:])
    assert "task_completed" in [event for event, _ in instance], instance
