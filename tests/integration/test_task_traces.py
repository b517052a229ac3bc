"""One trace per task, across iterations and across a SIGKILL of the runtime: the task's trace
context is recorded with the task (store/trace_statements.py), so the resumed iteration's
spans, in the next process, join the trace the caller's PUT started. Real processes: the
stand-in, ``ankka serve`` (killed, then started again on the same SQLite store) and Jaeger,
whose query API the spans are read back from."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import Script
from tests.integration.tasks_crash import script, serve_tasks, tool_runs, wait_final
from tests.support.eventually import eventually
from tests.support.jaeger import Jaeger, Span
from tests.support.processes import Server

pytestmark = pytest.mark.integration

BODY = {"type": "summary", "instructions": "Summarise ankka."}
AGENT = "invoke_agent researcher"


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    running: list[Server] = []
    yield running
    for server in running:
        server.stop()


def _put(server: Server, task: str, traceparent: str) -> None:
    answer = httpx.put(
        f"{server.url}/v1/agents/researcher/tasks/{task}",
        json=BODY,
        headers={"traceparent": traceparent},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text


def _agents(spans: list[Span], service: str) -> list[Span]:
    found = [s for s in spans if s.name == AGENT and s.service == service]
    return sorted(found, key=lambda s: s.start)


def test_a_tasks_iterations_after_a_sigkill_join_the_trace_its_put_started(
    standin: Callable[[Script], Server],
    servers: list[Server],
    jaeger_backend: Jaeger,
    tmp_path: Path,
) -> None:
    model = standin(script(1))
    store_path = tmp_path / "store.sqlite3"
    store = f"sqlite:///{store_path}"
    log = tmp_path / "tool-runs.txt"
    slow = {"ANKKA_TEST_TOOL_LOG": str(log), "ANKKA_TEST_TOOL_SECONDS": "60"}
    first = serve_tasks(model, store, env={**slow, **jaeger_backend.env("runtime-1")})
    servers.append(first)
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    _put(first, "t1", f"00-{trace_id}-{caller}-01")

    # The first iteration's model call is answered and exported; its tool is running.
    eventually(lambda: tool_runs(log) >= 1, what="the first iteration's tool to run")
    before = jaeger_backend.trace(trace_id, names={"chat standin"})
    first.process.kill()  # SIGKILL: the iteration's invoke_agent span never ends
    first.process.wait()
    with sqlite3.connect(store_path) as db:
        (recorded,) = db.execute(
            "SELECT context FROM ankka_task_traces WHERE task = 't1'"
        ).fetchone()
    assert trace_id in recorded

    fast = {"ANKKA_TEST_TOOL_LOG": str(log), "ANKKA_TEST_TOOL_SECONDS": "0"}
    second = serve_tasks(model, store, env={**fast, **jaeger_backend.env("runtime-2")})
    servers.append(second)
    records = wait_final(second, ["t1"])
    assert records["t1"]["state"] == "completed", records
    assert records["t1"]["iterations"]["used"] == 2

    spans = eventually(
        lambda: _enough(jaeger_backend.spans(trace_id)), what="the resumed task's spans"
    )
    assert {s.trace_id for s in spans} == {trace_id}
    (put,) = [s for s in spans if s.name.startswith("PUT ")]
    assert put.service == "runtime-1" and put.parent_id == caller
    # Before the kill: the first model call of iteration 1, in the PUT's trace.
    (chat_before,) = [s for s in before if s.name == "chat standin"]
    assert chat_before.service == "runtime-1"
    # After it: iteration 1 resumed (its tool run again, no model call) and iteration 2,
    # both children of the PUT's server span, from the second process.
    resumed, last = _agents(spans, "runtime-2")
    assert resumed.parent_id == put.span_id and last.parent_id == put.span_id
    assert resumed.tags["ankka.task.id"] == "t1"
    assert resumed.tags["ankka.task.iteration"] == 1
    assert resumed.tags["ankka.turn.resumed"] is True
    assert resumed.tags["ankka.model_calls"] == 0
    assert last.tags["ankka.task.iteration"] == 2
    assert last.tags["gen_ai.usage.input_tokens"] == 20
    runs = [s for s in spans if s.service == "runtime-2" and s.name.startswith("execute_tool")]
    assert {(s.name, s.parent_id) for s in runs} == {
        ("execute_tool lookup", resumed.span_id),
        ("execute_tool complete_task", last.span_id),
    }


def _enough(spans: list[Span]) -> list[Span]:
    """The trace once the second process's two iterations and their children are in."""
    agents = _agents(spans, "runtime-2")
    assert len(agents) == 2, [(s.name, s.service) for s in spans]
    ids = {a.span_id for a in agents}
    children = [s for s in spans if s.parent_id in ids]
    assert len(children) >= 3, [(s.name, s.service) for s in spans]  # 2 tools, 1 chat
    return spans
