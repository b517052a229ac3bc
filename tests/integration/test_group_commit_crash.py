"""Group commit survives a crash: ``ankka serve`` SIGKILLed while 32 sessions take turns at
once (their appends sharing commits), then started again on the same SQLite file. Every turn
that was answered is in the journal, whole: its user message and its answer, in order."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import Script
from tests.integration.tasks_crash import wait_until
from tests.support.processes import Server

pytestmark = pytest.mark.integration

SESSIONS = 32
TURNS = 40  # at most, per session: the loop stops by itself
ANSWER = {"text": "Sunny, 21 degrees."}


def take_turns(url: str, session: str, answered: list[str], stop: threading.Event) -> None:
    """Turns on one session until the server dies or ``stop``; each answered turn's text."""
    with httpx.Client(timeout=30) as client:
        for number in range(TURNS):
            if stop.is_set():
                return
            text = f"{session} turn {number}"
            try:
                reply = client.post(
                    f"{url}/v1/agents/weather/sessions/{session}", json={"message": text}
                )
            except httpx.HTTPError:
                return  # killed: this turn was never answered
            if reply.status_code != 200:
                return
            answered.append(text)


def test_every_answered_turn_of_32_sessions_is_in_the_journal_after_a_sigkill(
    standin: Callable[[Script], Server],
    serve: Callable[..., Server],
    tmp_path: Path,
) -> None:
    model = standin([ANSWER] * (SESSIONS * TURNS + 10))
    store = f"sqlite:///{tmp_path / 'sessions.sqlite3'}"
    first = serve(model.url, store=store)
    answered: dict[str, list[str]] = {f"s{n:02d}": [] for n in range(SESSIONS)}
    stop = threading.Event()
    workers = [
        threading.Thread(target=take_turns, args=(first.url, name, done, stop), daemon=True)
        for name, done in answered.items()
    ]
    for worker in workers:
        worker.start()
    try:
        wait_until(lambda: sum(map(len, answered.values())) >= 200, "200 answered turns")
    finally:
        first.process.kill()  # SIGKILL with turns in flight: no shutdown, no flush
        first.process.wait()
        stop.set()
        for worker in workers:
            worker.join(timeout=60)
    assert all(not worker.is_alive() for worker in workers)
    total = sum(map(len, answered.values()))
    assert total >= 200

    second = serve(model.url, store=store)
    for name, texts in answered.items():
        history = httpx.get(f"{second.url}/v1/sessions/{name}/messages", timeout=30).json()
        messages = history["messages"]
        users = [m["content"] for m in messages if m["role"] == "user"]
        # Every answered turn is there, in order; a turn cut off by the kill may be there too
        # (committed, its reply lost on the way), but never half of one.
        assert users[: len(texts)] == texts, name
        assert len(users) - len(texts) <= 1, name
        roles = [m["role"] for m in messages]
        assert roles == ["user", "assistant"] * len(users), name
