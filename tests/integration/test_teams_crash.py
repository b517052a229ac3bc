"""A member killed mid-item. On PostgreSQL: two ``ankka serve examples.newsroom:service``
share one store; the first is SIGKILLed while its researcher's item is half done (its first
answer recorded, its second call in flight). Its claim runs out after the lease, the item
comes back to the backlog, and the other process's researcher claims it and finishes it from
its journal: no recorded model call is asked again, every item ends once, and no item was
claimed by two members at once. On SQLite: the one process, killed and started again, keeps
its own claim and carries the item on at once."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.integration.conftest import Script
from tests.integration.tasks_crash import asked_keys, model_requests, recorded_keys
from tests.integration.test_teams import serve_newsroom, wait_item
from tests.support.eventually import eventually
from tests.support.postgres import fresh_database
from tests.support.processes import Server

pytestmark = pytest.mark.integration

ITEMS = ["t1", "t2", "t3"]
TASK = "team:newsroom:t1"
LEASE = 4.0  # a loaded machine stalls a process for a second or two: no claim lost by it


def turns(count: int) -> list[dict[str, Any]]:
    """lookup (at once), then complete_task (slowly, so a kill finds it in flight); twice
    over, as a call cut off by a kill is asked again."""
    lookup = {
        "when": "user",
        "tool_calls": [{"name": "lookup", "arguments": {"topic": "sqlite"}}],
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }
    done = {
        "when": "tool",
        "tool_calls": [
            {"name": "complete_task", "arguments": {"title": "sqlite", "points": ["one file"]}}
        ],
        "usage": {"input_tokens": 20, "output_tokens": 4},
        "delay_ms": 2500,
    }
    return [lookup, done] * (count * 2)


def claims(store: str) -> list[tuple[str, int, str, str, datetime]]:
    with psycopg.connect(store) as conn:
        rows = conn.execute(
            "SELECT item, number, agent, instance, claimed_at FROM ankka_team_claims "
            "ORDER BY item, number"
        ).fetchall()
    return [(r[0], int(r[1]), r[2], r[3], datetime.fromisoformat(r[4])) for r in rows]


def half_done_by(store: str, instance: str) -> str | None:
    """The item ``instance`` holds now whose first answer is recorded, its second not."""
    with psycopg.connect(store) as conn:
        held = conn.execute(
            "SELECT id FROM ankka_team_items WHERE state = 'claimed' AND claim_instance = %s",
            (instance,),
        ).fetchall()
    recorded = recorded_keys(store)
    for (item,) in held:
        task = f"team:newsroom:{item}"
        if (task, 0) in recorded and (task, 2) not in recorded:
            return str(item)
    return None


def test_a_killed_members_item_is_finished_by_another_with_nothing_asked_twice(
    standin: Callable[[Script], Server], servers: list[Server], postgres_server: str
) -> None:
    store = fresh_database(postgres_server, "team")
    model = standin(turns(len(ITEMS)))
    one = serve_newsroom(model, store, lease=LEASE)
    servers.append(one)
    for item in ITEMS:
        answer = httpx.put(
            f"{one.url}/v1/teams/newsroom/items/{item}",
            json={"type": "summary", "instructions": f"Summarise {item}."},
            timeout=30,
        )
        assert answer.status_code == 201, answer.text
    eventually(lambda: bool(claims(store)), what="the first process's claim", timeout=60)
    first_instance = claims(store)[0][3]
    two = serve_newsroom(model, store, lease=LEASE)
    servers.append(two)
    eventually(
        lambda: half_done_by(store, first_instance) is not None,
        what="the first process's item half done",
        timeout=60,
    )
    victim = half_done_by(store, first_instance)
    assert victim is not None
    one.process.kill()  # SIGKILL: no shutdown, no flush, its claim still held
    one.process.wait()
    recorded = recorded_keys(store)
    before = len(model_requests(model))
    records = {item: wait_item(two, item, seconds=120) for item in ITEMS}
    assert {i: r["state"] for i, r in records.items()} == dict.fromkeys(ITEMS, "completed")
    finished_by = records[victim]["claimed_by"]
    assert finished_by["agent"] == "researcher"
    assert finished_by["instance"] != first_instance  # another member instance finished it
    assert records[victim]["claims"] == 2
    again = sorted(set(asked_keys(model_requests(model)[before:])) & recorded)
    assert again == [], f"recorded calls asked again after the kill: {again}"
    # Every item ended once: one task each, completed once; and no two live claims on an
    # item at once: a claim is made again only after the one before it ran out.
    made = claims(store)
    by_item: dict[str, list[tuple[str, int, str, str, datetime]]] = {}
    for claim in made:
        by_item.setdefault(claim[0], []).append(claim)
    assert sorted(by_item) == ITEMS
    for item, held in by_item.items():
        if len(held) > 1:
            assert item == victim
            assert held[1][4] >= held[0][4]
            assert (held[1][4] - held[0][4]).total_seconds() >= LEASE
    with psycopg.connect(store) as conn:
        ends = conn.execute(
            "SELECT id, state FROM ankka_tasks WHERE id LIKE 'team:%' ORDER BY id"
        ).fetchall()
    assert ends == [(f"team:newsroom:{i}", "completed") for i in ITEMS]


def test_on_sqlite_a_restarted_process_carries_its_own_claim_on_at_once(
    standin: Callable[[Script], Server], servers: list[Server], tmp_path: Path
) -> None:
    path = tmp_path / "store.sqlite3"
    store = f"sqlite:///{path}"
    model = standin(turns(1))
    first = serve_newsroom(model, store)
    servers.append(first)
    answer = httpx.put(
        f"{first.url}/v1/teams/newsroom/items/t1",
        json={"type": "summary", "instructions": "Summarise t1."},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    eventually(
        lambda: (TASK, 0) in recorded_keys(store) and len(model_requests(model)) == 2,
        what="the item's second call in flight",
        timeout=60,
    )
    first.process.kill()
    first.process.wait()
    recorded = recorded_keys(store)
    before = len(model_requests(model))
    second = serve_newsroom(model, store)
    servers.append(second)
    record = wait_item(second, "t1")
    assert record["state"] == "completed", record
    assert record["claims"] == 1  # its own claim, kept across the restart: nothing returned
    again = sorted(set(asked_keys(model_requests(model)[before:])) & recorded)
    assert again == [], f"recorded calls asked again after the restart: {again}"
    with sqlite3.connect(path) as db:
        made = db.execute("SELECT instance FROM ankka_team_claims").fetchall()
    assert [m[0] for m in made] == [record["claimed_by"]["instance"]]
