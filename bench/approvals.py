"""Tool approvals: decision received → approved tool started, on SQLite and PostgreSQL.

Everything real and on loopback: the stand-in model server, ``ankka serve`` as a process
(the approval crash tests' ``refunds`` agent, whose ``refund`` over 100 waits for a
decision), the store (SQLite with ``synchronous=FULL``; PostgreSQL from Debian's server with
``fsync`` on). The tool writes the wall clock when it starts; the client takes the wall clock
just before it sends ``POST /v1/approvals/{id}``. Between the two: the request parsed, the
session's turn lock, the journal read, the decision appended (durably) and its index row
updated, the handler planned again, the approved call's start appended (durably), the tool
dispatched to its thread. Printed:

- round trip p50/p99 over --decisions decisions made one at a time (each on its own
  suspended session);
- --burst sessions suspended, then all decided at once (concurrent requests): each tool's
  start after the burst's first send, p50/p99/max, and the wall clock to the last start.

Run: ``python bench/approvals.py [--decisions 200] [--burst 100] [--skip-postgres]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.postgres import postgres_cluster
from tests.support.processes import Server, ankka_command, start

TARGET = "tests.integration.approval_services:service"
CALL = {"call": 1, "tool_calls": [{"name": "refund", "arguments": {"order": "A1", "amount": 250}}]}
DONE = {"call": 2, "text": "Refunded."}


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def suspend(client: httpx.AsyncClient, session: str) -> dict[str, Any]:
    answer = await client.post(
        f"/v1/agents/refunds/sessions/{session}", json={"message": "refund A1"}
    )
    assert answer.status_code == 202, answer.text
    request: dict[str, Any] = answer.json()["approvals"][0]
    return request


async def decide(client: httpx.AsyncClient, request: dict[str, Any]) -> None:
    answer = await client.post(
        f"/v1/approvals/{request['id']}",
        json={"decision": "approve", "digest": request["digest"]},
    )
    assert answer.status_code == 200, answer.text


def stamps(path: Path) -> list[float]:
    return [float(line) for line in path.read_text().splitlines()] if path.exists() else []


async def measure(url: str, stamp_file: Path, decisions: int, burst: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=burst + 4)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        for warm in range(5):
            await decide(client, await suspend(client, f"warm-{warm}"))
        latencies = []
        for n in range(decisions):
            request = await suspend(client, f"one-{n}")
            seen = len(stamps(stamp_file))
            sent = time.time()
            await decide(client, request)
            latencies.append((stamps(stamp_file)[seen] - sent) * 1000)
        requests = await asyncio.gather(*(suspend(client, f"burst-{n}") for n in range(burst)))
        seen = len(stamps(stamp_file))
        first = time.time()
        await asyncio.gather(*(decide(client, r) for r in requests))
        starts = [(s - first) * 1000 for s in stamps(stamp_file)[seen:]]
    assert len(starts) == burst, (len(starts), burst)
    return {
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(quantile(latencies, 0.99), 2),
        "burst": burst,
        "burst_p50_ms": round(statistics.median(starts), 1),
        "burst_p99_ms": round(quantile(starts, 0.99), 1),
        "burst_last_ms": round(max(starts), 1),
    }


def run(store: str, work: Path, decisions: int, burst: int) -> dict[str, Any]:
    sessions = decisions + burst + 5
    script = work / f"script-{time.monotonic_ns()}.json"
    script.write_text(json.dumps([CALL, DONE] * sessions))
    model = start(ankka_command("standin", "--script", str(script), "--port", "0"))
    stamp_file = work / f"stamps-{time.monotonic_ns()}.txt"
    env = {
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": f"{model.url}/v1",
        "ANKKA_MODEL_DEFAULT_MODEL": "standin",
        "ANKKA_BENCH_TOOL_STAMPS": str(stamp_file),
    }
    server: Server | None = None
    try:
        server = start(ankka_command("serve", TARGET, "--port", "0", "--store", store), env=env)
        return asyncio.run(measure(server.url, stamp_file, decisions, burst))
    except AssertionError:
        if server is not None:
            print("".join(server.output)[-4000:], file=sys.stderr)
        raise
    finally:
        if server is not None:
            server.stop()
        model.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=200)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--skip-postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ankka-bench-approvals-") as tmp:
        work = Path(tmp)
        sqlite = run(f"sqlite:///{work / 'store.sqlite3'}", work, args.decisions, args.burst)
        print(f"SQLite:     {sqlite}")
        if not args.skip_postgres:
            with postgres_cluster(fsync=True) as dsn:
                pg = run(dsn, work, args.decisions, args.burst)
            print(f"PostgreSQL: {pg}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
