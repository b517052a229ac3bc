"""A server's question waits in the process whose task asked it; cancelled through another
process on the same PostgreSQL store (another pod), the task's question is closed there as a
local cancel closes it, not left open until its expiry: the catalogue
(examples/mcp_catalog.py) on loopback, two ``ankka serve`` processes on one database, the
stand-in as the model. The same when the cancel is told while the holder's listening
connection is down (terminated in the server, and new connections to the database refused
meanwhile): once it hears again, the holder reads the question's task from the store."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.integration.conftest import Script
from tests.integration.test_mcp import kept
from tests.integration.test_mcp_asking import (
    BUY,
    AskingRig,
    closed_question,
    decide,
    pending_question,
)
from tests.integration.test_task_notifications_pods import _owner_pid
from tests.support.eventually import eventually
from tests.support.processes import Server

pytestmark = pytest.mark.integration

# The wording of a local cancel's (test_mcp_asking.py), whichever process cancelled.
CANCELLED = "the task that asked ended (cancelled) before it was answered"


@pytest.fixture
def rig(tmp_path: Path, standin: Callable[[Script], Server]) -> Iterator[AskingRig]:
    yield from kept(AskingRig(tmp_path, standin))


def _database(server: str) -> str:
    name = f"asking_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server.rsplit("/", 1)[0] + f"/{name}"


def _journal(store: str, kind: str) -> list[dict[str, Any]]:
    with psycopg.connect(store, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT body FROM ankka_events WHERE kind = %s ORDER BY session, seq", (kind,)
        ).fetchall()
    return [json.loads(r[0]) for r in rows]


@dataclass
class Asked:
    """Two pods on one database; the one that works task t1 holds its question."""

    store: str
    mcp: Server
    pods: list[Server]
    holder: Server
    other: Server
    question: dict[str, Any]


def _asked(rig: AskingRig, postgres_server: str) -> Asked:
    store = _database(postgres_server)
    mcp = rig.catalog("--elicit-tool", "--handshake-only")
    model = rig.standin([BUY])
    # The question's expiry is far past the test's wait: only the cancel can close it.
    pods = [rig.serve(mcp.url, model, store=store, elicitation_timeout="600") for _ in range(2)]
    task = {"type": "summary", "instructions": "Buy a kettle.", "instance": "desk"}
    put = httpx.put(f"{pods[0].url}/v1/agents/purchaser/tasks/t1", json=task, timeout=30)
    assert put.status_code == 201, put.text
    owner = eventually(lambda: _owner_pid(store, "desk"), what="an owner took the instance")
    (holder,) = [p for p in pods if p.process.pid == owner]
    (other,) = [p for p in pods if p.process.pid != owner]
    question = pending_question(holder)
    assert question["session"] == "task:t1", question
    return Asked(store, mcp, pods, holder, other, question)


def _cancel(other: Server) -> None:
    cancelled = httpx.post(f"{other.url}/v1/tasks/t1/cancel", timeout=30)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "cancelled", cancelled.json()


def test_a_tasks_question_is_closed_when_another_process_cancels_the_task(
    rig: AskingRig, postgres_server: str
) -> None:
    asked = _asked(rig, postgres_server)
    store, mcp, holder, question = asked.store, asked.mcp, asked.holder, asked.question
    _cancel(asked.other)

    shown = closed_question(holder, question)
    assert shown["decided_by"] == "platform", shown
    assert shown["reason"] == CANCELLED, shown
    late = decide(holder, question, "approve", content={"quantity": 1})
    assert late.status_code == 409, late.text
    assert "already decided: ended by platform" in late.text, late.text
    pending = httpx.get(f"{holder.url}/v1/approvals", params={"state": "pending"}).json()
    assert pending["approvals"] == [], pending
    page = httpx.get(f"{holder.url}/console/approvals", params={"state": "ended"})
    assert page.status_code == 200, page.text
    assert f'data-approval="{question["id"]}" data-state="ended"' in page.text, page.text
    assert "ended by platform" in page.text, page.text

    # The server was answered cancel, once (the spec's answer for a question dismissed
    # without a choice), and the call that waited journaled the end in the task's session.
    def told() -> list[str] | None:
        found = re.findall(r"elicitation answered (\w+)", "".join(mcp.output))
        return found or None

    assert eventually(told, what="the server's answer", timeout=30) == ["cancel"], mcp.output
    (recorded,) = _journal(store, "elicitation_answered")
    assert recorded["request"]["id"] == question["id"]
    assert recorded["action"] == "cancel" and recorded["content"] is None
    assert recorded["decided"]["decision"] == "ended"
    assert recorded["decided"]["reason"] == CANCELLED
    for pod in asked.pods:
        record = httpx.get(f"{pod.url}/v1/tasks/t1").json()
        assert record["state"] == "cancelled", record


def _listeners(admin: psycopg.Connection[Any], database: str) -> list[int]:
    """The backends of the database's listening connections (each pod's relay)."""
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND query LIKE 'LISTEN%%'"
        " AND application_name = 'ankka-notices'",
        (database,),
    ).fetchall()
    return [r[0] for r in rows]


def test_a_cancel_told_while_the_holders_listener_was_down_still_closes_its_question(
    rig: AskingRig, postgres_server: str
) -> None:
    asked = _asked(rig, postgres_server)
    database = asked.store.rsplit("/", 1)[1]
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        assert len(_listeners(admin, database)) == 2  # each pod's relay listens
        # No new connection to the database from here on (the pools keep theirs), and the
        # listening ones are ended: the relays cannot listen again until it is allowed.
        admin.execute(f"ALTER DATABASE {database} ALLOW_CONNECTIONS false")
        try:
            for pid in _listeners(admin, database):
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            eventually(lambda: not _listeners(admin, database) or None, what="the listeners ended")
            _cancel(asked.other)  # its notice goes out while no pod listens
        finally:
            admin.execute(f"ALTER DATABASE {database} ALLOW_CONNECTIONS true")
        eventually(lambda: len(_listeners(admin, database)) == 2 or None, what="the relays back")

    shown = closed_question(asked.holder, asked.question)
    assert shown["decided_by"] == "platform", shown
    assert shown["reason"] == CANCELLED, shown
    (recorded,) = _journal(asked.store, "elicitation_answered")
    assert recorded["decided"]["reason"] == CANCELLED
