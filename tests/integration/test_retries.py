"""One retry layer: ankka's. The SDKs' own retries are off, so what the stand-in receives is
exactly what ankka decided to send, and every retry is counted on ``/metrics``.

Before, a task whose model was down made five failed attempts of three HTTP requests each
(the ``openai`` SDK retried twice under every attempt of ankka's): fifteen. Now a task's five
attempts are five requests, and a turn's call is made at most three times (two retries).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.integration.conftest import received
from tests.support.processes import Server

pytestmark = pytest.mark.integration

BUSY: dict[str, Any] = {"status": 503, "text": "overloaded, try again"}


def _chats(model: Server) -> int:
    return sum(r["path"] == "/v1/chat/completions" for r in received(model))


def _retries(server: Server) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    found = re.findall(
        r'^ankka_model_retries_total\{[^}]*kind="([a-z_]+)"[^}]*\} (\S+)$', text, re.M
    )
    assert all(kind == "model_unavailable" for kind, _ in found), found
    return sum(float(value) for _, value in found)


def test_a_turn_retries_a_failed_call_twice_and_the_stand_in_sees_each_request_once(
    standin: Callable[[Any], Server], serve: Callable[..., Server]
) -> None:
    model = standin([BUSY, BUSY, {"text": "at last"}, BUSY, BUSY, BUSY, {"text": "unused"}])
    server = serve(model.url)
    first = httpx.post(
        f"{server.url}/v1/agents/polite/sessions/a", json={"message": "hi"}, timeout=60
    )
    assert first.status_code == 200, first.text
    assert first.json()["reply"] == "at last"
    assert _chats(model) == 3  # two retries, no SDK retry under them
    assert _retries(server) == 2

    second = httpx.post(
        f"{server.url}/v1/agents/polite/sessions/b", json={"message": "hi"}, timeout=60
    )
    assert second.status_code == 502, second.text
    assert second.json()["error"]["type"] == "model_unavailable"
    assert _chats(model) == 6  # three attempts, then the turn fails
    assert _retries(server) == 4


def test_a_tasks_five_failed_attempts_are_five_requests(
    standin: Callable[[Any], Server], serve: Callable[..., Server]
) -> None:
    model = standin([BUSY] * 6)
    server = serve(model.url, target="examples.tasks:service")
    body = {"type": "summary", "instructions": "Summarise ankka."}
    put = httpx.put(f"{server.url}/v1/agents/researcher/tasks/t1", json=body, timeout=30)
    assert put.status_code == 201, put.text
    task = httpx.get(f"{server.url}/v1/tasks/t1", params={"wait": 60}, timeout=90).json()
    assert task["state"] == "failed", task
    assert "5 attempts in a row failed" in task["reason"]
    assert _chats(model) == 5  # was 15: three SDK requests under each attempt
    assert _retries(server) == 4  # the fifth failure ends the task, it is not retried
