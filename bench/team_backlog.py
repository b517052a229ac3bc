"""A team's backlog and a moderated conversation, measured (docs/teams.md).

Everything real and on loopback: the stand-in model server (no delay), ``ankka serve
bench.team_service:service`` as processes, PostgreSQL from Debian's server with ``fsync`` on.

- **Backlog**: --items summaries (two iterations each: lookup, complete_task) put on the
  team's backlog over HTTP while --processes runtime processes serve it (each with
  --instances member instances). From the store: claims/s (items over the span from the
  first claim to the last), items completed/s (the first PUT to the last item's end), and
  each item's latency from ready (created, depending on nothing) to its first claim, p50/p99.
- **A moderated turn's overhead**: one process on SQLite; --turns plain request turns
  (``POST /v1/agents/plain/sessions/{s}``, one model call each) against conversations of
  one speaker and 10 turns (``POST /v1/conversations/solo/sessions/{s}``), per turn, p50.

Run: ``python bench/team_backlog.py [--items 1000] [--processes 3] [--instances 2]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.postgres import postgres_cluster
from tests.support.processes import Server, ankka_command, start

TARGET = "bench.team_service:service"


def standin(path: Path, turns: list[dict[str, Any]]) -> Server:
    path.write_text(json.dumps(turns))
    return start(ankka_command("standin", "--script", str(path), "--port", "0"))


def env(model: Server, instances: int) -> dict[str, str]:
    return {
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": f"{model.url}/v1",
        "ANKKA_MODEL_DEFAULT_MODEL": "standin",
        "BENCH_TEAM_INSTANCES": str(instances),
    }


def items_script(items: int) -> list[dict[str, Any]]:
    lookup = {"when": "user", "tool_calls": [{"name": "lookup", "arguments": {"topic": "sqlite"}}]}
    done = {
        "when": "tool",
        "tool_calls": [{"name": "complete_task", "arguments": {"title": "s", "points": ["p"]}}],
    }
    return [lookup, done] * items


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def backlog(dsn: str, tmp: Path, items: int, processes: int, instances: int) -> None:
    model = standin(tmp / "items.json", items_script(items))
    store = dsn
    servers = [
        start(
            ankka_command("serve", TARGET, "--port", "0", "--store", store),
            env=env(model, instances),
        )
        for _ in range(processes)
    ]
    try:
        began = time.monotonic()
        with httpx.Client(timeout=30) as client:
            for n in range(items):
                body = {"type": "summary", "instructions": f"Summarise sqlite ({n})."}
                url = f"{servers[n % processes].url}/v1/teams/bench/items/i{n:05d}"
                assert client.put(url, json=body).status_code == 201
        put_s = time.monotonic() - began
        with psycopg.connect(store) as conn:
            while True:
                done = conn.execute(
                    "SELECT COUNT(*) FROM ankka_team_items WHERE state = 'completed'"
                ).fetchone()
                if done is not None and int(done[0]) >= items:
                    break
                if time.monotonic() - began > 1800:
                    raise SystemExit("the backlog did not finish within 30 minutes")
                time.sleep(0.2)
            wall = time.monotonic() - began
            rows = conn.execute(
                "SELECT i.created_at, c.claimed_at FROM ankka_team_items i JOIN "
                "ankka_team_claims c ON c.team = i.team AND c.item = i.id AND c.number = 1"
            ).fetchall()
    finally:
        for server in servers:
            server.stop()
        model.stop()
    created = [datetime.fromisoformat(r[0]) for r in rows]
    claimed = [datetime.fromisoformat(r[1]) for r in rows]
    waits = [(c - r).total_seconds() * 1000 for r, c in zip(created, claimed, strict=True)]
    span = (max(claimed) - min(claimed)).total_seconds()
    print(
        f"backlog: {items} items, {processes} processes x {instances} member instances, "
        f"PostgreSQL fsync on\n"
        f"  PUTs {put_s:.1f} s; every item completed {wall:.1f} s after the first PUT "
        f"({items / wall:.1f} items/s)\n"
        f"  claims/s {items / span:.1f} (first claim to last)\n"
        f"  ready -> claimed ms: p50 {pct(waits, 0.5):.0f}, p99 {pct(waits, 0.99):.0f}"
    )


def moderation(tmp: Path, turns: int) -> None:
    said = {"text": "ok", "usage": {"input_tokens": 10, "output_tokens": 1}}
    model = standin(tmp / "said.json", [said] * (turns * 3))
    store = f"sqlite:///{tmp / 'moderation.sqlite3'}"
    server = start(
        ankka_command("serve", TARGET, "--port", "0", "--store", store), env=env(model, 1)
    )
    plain: list[float] = []
    moderated: list[float] = []
    try:
        with httpx.Client(timeout=120) as client:
            for n in range(turns // 10):
                for k in range(10):
                    began = time.perf_counter()
                    answer = client.post(
                        f"{server.url}/v1/agents/plain/sessions/p{n}-{k}", json={"message": "Go."}
                    )
                    assert answer.status_code == 200, answer.text
                    plain.append((time.perf_counter() - began) * 1000)
                began = time.perf_counter()
                answer = client.post(
                    f"{server.url}/v1/conversations/solo/sessions/c{n}", json={"message": "Go."}
                )
                assert answer.status_code == 200, answer.text
                assert len(answer.json()["turns"]) == 10, answer.text
                moderated.append((time.perf_counter() - began) * 1000 / 10)
    finally:
        server.stop()
        model.stop()
    p_plain, p_mod = statistics.median(plain), statistics.median(moderated)
    print(
        f"moderation: {len(plain)} plain turns, {len(moderated)} conversations of 10 turns, "
        "SQLite\n"
        f"  plain request turn p50 {p_plain:.1f} ms; moderated turn p50 {p_mod:.1f} ms "
        f"(x{p_mod / p_plain:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--skip-backlog", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_backlog:
            with postgres_cluster(fsync=True) as dsn:
                backlog(dsn, Path(tmp), args.items, args.processes, args.instances)
        moderation(Path(tmp), args.turns)


if __name__ == "__main__":
    main()
