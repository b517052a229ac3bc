"""What the crash tests need: start ``ankka serve`` on a store, read what the store recorded
behind the runtime's back, and check the stand-in's request log against it."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx

from tests.integration.conftest import model_env, received
from tests.support.eventually import eventually
from tests.support.processes import Server, ankka_command, start

__all__ = [
    "Key",
    "asked_keys",
    "recorded_keys",
    "serve_tasks",
    "wait_until",
]

TARGET = "tests.integration.task_services:service"
Key = tuple[str, int]  # (task, how many recorded messages the request carried)
_TASK = re.compile(r"^Task (\S+) \(type ")
_MESSAGE_KINDS = frozenset({"user_message", "assistant_message", "tool_result"})


def serve_tasks(
    standin: Server,
    store: str,
    *,
    env: dict[str, str] | None = None,
    lease: float = 10.0,
    max_instances: int = 100,
    buffer: int = 256,
) -> Server:
    command = ankka_command("serve", TARGET, "--port", "0", "--store", store)
    command += ["--lease-seconds", str(lease), "--max-instances", str(max_instances)]
    command += ["--notification-buffer", str(buffer)]
    return start(command, env={**model_env(standin.url), **(env or {})})


def wait_until(check: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    """:func:`~tests.support.eventually.eventually`, as the crash tests spell it."""
    eventually(check, what=what, timeout=seconds)


def _keys(rows: Iterable[tuple[str, str]]) -> set[Key]:
    """The request behind each recorded response: a response recorded after ``h`` messages of
    the task's session answered the request that carried those ``h`` messages."""
    counts: dict[str, int] = {}
    keys: set[Key] = set()
    for session, kind in rows:
        task = session.removeprefix("task:")
        if kind == "assistant_message":
            keys.add((task, counts.get(task, 0)))
        if kind in _MESSAGE_KINDS:  # the request carries messages, not the other records
            counts[task] = counts.get(task, 0) + 1
    return keys


def recorded_keys(store: str) -> set[Key]:
    """Read straight from the store, with the runtime dead: every recorded model call."""
    query = "SELECT session, kind FROM {table} WHERE session LIKE 'task:%' ORDER BY session, seq"
    if store.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(store) as conn:
            rows = conn.execute(query.format(table="ankka_events")).fetchall()
    else:
        with sqlite3.connect(store.removeprefix("sqlite:///")) as db:
            rows = db.execute(query.format(table="events")).fetchall()
    return _keys((r[0], r[1]) for r in rows)


def asked_keys(requests: list[dict[str, Any]]) -> list[Key]:
    """The key of every model request in the stand-in's log, in arrival order."""
    keys: list[Key] = []
    for request in requests:
        messages = request["body"]["messages"]
        match = _TASK.match(messages[1]["content"])
        assert match, messages[1]
        keys.append((match.group(1), len(messages) - 2))  # less the system and task messages
    return keys


def put_tasks(server: Server, bodies: dict[str, dict[str, Any]]) -> None:
    with httpx.Client(timeout=30) as client:
        for task, body in bodies.items():
            answer = client.put(f"{server.url}/v1/agents/researcher/tasks/{task}", json=body)
            assert answer.status_code == 201, answer.text


def wait_final(server: Server, tasks: Iterable[str], seconds: float = 90) -> dict[str, Any]:
    records: dict[str, Any] = {}
    with httpx.Client(timeout=seconds + 10) as client:
        for task in tasks:
            answer = client.get(f"{server.url}/v1/tasks/{task}", params={"wait": seconds})
            records[task] = answer.json()
    return records


def model_requests(standin: Server) -> list[dict[str, Any]]:
    return [r for r in received(standin) if r["path"] == "/v1/chat/completions"]


def script(turns: int, *, delay_ms: int = 0) -> list[dict[str, Any]]:
    """Enough turns for ``turns`` tasks of lookup → complete_task, twice over (calls cut off
    by a kill are asked again)."""
    lookup = {
        "when": "user",
        "tool_calls": [{"name": "lookup", "arguments": {"topic": "ankka"}}],
        "usage": {"input_tokens": 10, "output_tokens": 2},
        "delay_ms": delay_ms,
    }
    done = {
        "when": "tool",
        "tool_calls": [
            {"name": "complete_task", "arguments": {"title": "ankka", "points": ["known"]}}
        ],
        "usage": {"input_tokens": 20, "output_tokens": 4},
        "delay_ms": delay_ms,
    }
    return [lookup, done] * (turns * 2)


def tool_runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def dump(value: Any) -> str:
    return json.dumps(value, indent=1)[:4000]
