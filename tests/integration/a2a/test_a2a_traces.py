"""A2A requests continue the caller's trace: the ``traceparent`` an A2A client sends is read by
``ankka serve`` (its SERVER span is the caller's span's child), so a request agent's turn, and
an autonomous agent's task and every iteration of it, are in the caller's trace.

Real processes on loopback: the stand-in as the model and ``ankka serve`` exporting to Jaeger
(tests/support/jaeger.py), whose query API the spans are read back from. (ankka's sending of
the context to an A2A peer: tests/integration/a2a/test_remote_agents.py.)
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.integration.a2a.test_sdk_interop import CHAT, RESEARCH, V1
from tests.integration.conftest import Script
from tests.support.jaeger import Jaeger, Span
from tests.support.processes import Server

pytestmark = pytest.mark.integration

RPC = "POST /a2a/{agent}"


def _send(url: str, traceparent: str, text: str) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": secrets.token_hex(8), "role": "ROLE_USER",
                        "parts": [{"text": text}]},
            "configuration": {"returnImmediately": False},
        },
    }  # fmt: skip
    headers = {**V1, "traceparent": traceparent}
    answer = httpx.post(url, json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    assert "result" in found, found
    return found


def _no_orphans(spans: list[Span], caller: str) -> None:
    ids = {s.span_id for s in spans}
    orphans = [s.name for s in spans if s.parent_id not in ids and s.parent_id != caller]
    assert orphans == [], [(s.name, s.parent_id) for s in spans]


def test_an_a2a_request_agents_turn_is_in_the_callers_trace(
    standin: Callable[[Script], Server], serve: Callable[..., Server], jaeger_backend: Jaeger
) -> None:
    model = standin([{"text": "Sunny, 21 degrees."}])
    server = serve(model.url, target=CHAT, env=jaeger_backend.env("runtime"))
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    found = _send(f"{server.url}/a2a/echo", f"00-{trace_id}-{caller}-01", "Weather?")
    assert found["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    spans = jaeger_backend.trace(
        trace_id, names={RPC, "invoke_agent echo", "chat standin"}, caller=caller
    )
    assert {s.trace_id for s in spans} == {trace_id}
    _no_orphans(spans, caller)
    (rpc,) = [s for s in spans if s.name == RPC]
    assert rpc.parent_id == caller and rpc.kind == "server"
    (agent,) = [s for s in spans if s.name == "invoke_agent echo"]
    assert agent.parent_id == rpc.span_id
    assert agent.tags["ankka.turn.outcome"] == "finished"
    # The runtime's spans only: none of the a2a-sdk's (its tracer is quieted).
    assert [s.name for s in spans if s.name.startswith("a2a.")] == []


def test_an_a2a_task_and_its_iterations_are_in_the_callers_trace(
    standin: Callable[[Script], Server], serve: Callable[..., Server], jaeger_backend: Jaeger
) -> None:
    script = [
        {"when": "user", "tool_calls": [{"name": "lookup", "arguments": {"topic": "ankka"}}]},
        {"when": "tool", "tool_calls": [{"name": "complete_task", "arguments": {
            "title": "ankka", "points": ["it is known"]}}]},
    ]  # fmt: skip
    model = standin(script)
    server = serve(model.url, target=RESEARCH, env=jaeger_backend.env("runtime"))
    trace_id, caller = secrets.token_hex(16), secrets.token_hex(8)
    _send(f"{server.url}/a2a/researcher", f"00-{trace_id}-{caller}-01", "Summarise ankka.")

    names = {RPC, "invoke_agent researcher", "execute_tool complete_task"}
    spans = jaeger_backend.trace(trace_id, names=names, caller=caller)
    _no_orphans(spans, caller)
    (rpc,) = [s for s in spans if s.name == RPC]
    assert rpc.parent_id == caller
    iterations = [s for s in spans if s.name == "invoke_agent researcher"]
    assert {s.parent_id for s in iterations} == {rpc.span_id}
    assert {s.tags["ankka.task.iteration"] for s in iterations} >= {1}
