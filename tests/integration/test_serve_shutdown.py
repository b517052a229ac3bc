"""SIGTERM while a turn is longer than the grace period: the caller is answered in the API's
error shape (503 ``shutting_down`` with ``Retry-After``), the cut is logged, nothing of the
turn is written, and the process exits cleanly (issue 31, shutdown)."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import Script, received
from tests.support.eventually import eventually, eventually_async
from tests.support.processes import Server

pytestmark = pytest.mark.integration


async def test_a_turn_longer_than_the_grace_is_cut_with_the_apis_error(
    standin: Callable[[Script], Server], serve: Callable[..., Server], tmp_path: Path
) -> None:
    model = standin([{"text": "too late", "delay_ms": 60_000}])
    store = tmp_path / "sessions.sqlite3"
    server = serve(model.url, store=f"sqlite:///{store}")
    async with httpx.AsyncClient(timeout=60) as client:
        turn = asyncio.ensure_future(
            client.post(f"{server.url}/v1/agents/polite/sessions/s1", json={"message": "hi"})
        )

        async def asked() -> bool:
            return bool(await asyncio.to_thread(received, model))

        await eventually_async(asked, what="the turn's model call reached the stand-in")
        server.process.send_signal(signal.SIGTERM)
        answer = await turn
    assert answer.status_code == 503, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["retry-after"] == "1"
    error = answer.json()["error"]
    assert error["type"] == "shutting_down" and "send it again" in error["message"]
    eventually(lambda: server.process.poll() is not None, what="the process exits")
    assert server.process.returncode == 0
    log = "".join(server.output)
    assert "cut POST /v1/agents/polite/sessions/s1 after" in log, log
    assert "Traceback" not in log and "Internal Server Error" not in log, log
    with sqlite3.connect(store) as db:  # the cut turn wrote nothing of itself
        kinds = [r[0] for r in db.execute("SELECT kind FROM events WHERE session = 's1'")]
    assert "user" not in kinds and "assistant" not in kinds, kinds
