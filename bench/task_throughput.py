"""Durable tasks: ankka's autonomous agents against pydantic-ai + DBOS, in one run.

Everything real and on loopback: the stand-in model server, ``ankka serve`` as a process, the
store (SQLite with ``synchronous=FULL``; PostgreSQL from Debian's server with ``fsync`` on),
every record committed durably before the next step. The agent is the crash tests' researcher
(one ``lookup`` tool, a ``summary`` result); each task takes three iterations (lookup, lookup,
complete_task). Printed:

- iterations/s per runtime process: --tasks tasks created at once over HTTP, worked by one
  ``ankka serve`` (at most --concurrency instances at a time), wall clock from the first
  ``PUT`` to the last task's end, iterations counted at the stand-in; on SQLite and PostgreSQL;
- the same agent as a pydantic-ai ``DBOSAgent`` (every model request and tool call a DBOS
  step in its SQLite system database), --concurrency runs at a time, in its own venv
  (``--dbos-python``, default: this interpreter when it has ``dbos``);
- restart → first resumed iteration: --kills times, SIGKILL ``ankka serve`` during a task's
  model call, start it again on the same store, time to the stand-in receiving the resumed
  call (from the new process's start, and from its "listening" line);
- cascade: cancelling a task that --cascade others depend on (a chain), the one request's time;
- the floor: the store's own durable appends/s in the same run (``bench/journal_append.py``'s
  many-sessions shape, on a fresh store of each kind), and ankka's iterations/s as a fraction
  of it; on PostgreSQL also the transactions the server committed per iteration
  (``pg_stat_database.xact_commit``: every write's transaction and every read's statement).

Run: ``python bench/task_throughput.py`` (see docs/benchmarks.md for the peer's venv).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.postgres import postgres_cluster
from tests.support.processes import Server, ankka_command, start

TARGET = "tests.integration.task_services:service"
BODY = {"type": "summary", "instructions": "Summarise ankka."}
LOOKUP = {"tool_calls": [{"name": "lookup", "arguments": {"topic": "ankka"}}]}
RESULT = {"title": "ankka", "points": ["known"]}


def script(tasks: int, finish: str, *, delay_ms: int = 0) -> list[dict[str, Any]]:
    """Three iterations a task, whatever order the tasks' calls arrive in: the first and the
    second call of a conversation get a lookup, the third the end (``finish``)."""
    first = {**LOOKUP, "call": 1, "delay_ms": delay_ms}
    again = {**LOOKUP, "call": 2, "delay_ms": delay_ms}
    end = {"call": 3, "tool_calls": [{"name": finish, "arguments": RESULT}], "delay_ms": delay_ms}
    return [first, again, end] * tasks


def standin(path: Path, turns: list[dict[str, Any]]) -> Server:
    path.write_text(json.dumps(turns))
    return start(ankka_command("standin", "--script", str(path), "--port", "0"))


def model_env(model: Server) -> dict[str, str]:
    return {
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": f"{model.url}/v1",
        "ANKKA_MODEL_DEFAULT_MODEL": "standin",
    }


def serve(model: Server, store: str, *extra: str) -> Server:
    command = ankka_command("serve", TARGET, "--port", "0", "--store", store, *extra)
    return start(command, env=model_env(model))


def served(model: Server) -> int:
    return int(httpx.get(f"{model.url}/_standin/requests", timeout=30).json()["served"])


async def put_all(url: str, bodies: dict[str, dict[str, Any]], concurrency: int = 32) -> None:
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=60) as client:

        async def one(task: str, body: dict[str, Any]) -> None:
            async with gate:
                answer = await client.put(f"{url}/v1/agents/researcher/tasks/{task}", json=body)
                answer.raise_for_status()

        await asyncio.gather(*(one(t, b) for t, b in bodies.items()))


def wait_final(url: str, tasks: list[str]) -> dict[str, int]:
    states: dict[str, int] = {}
    final = ("completed", "failed", "cancelled")
    with httpx.Client(timeout=400) as client:
        for task in tasks:
            state = ""
            while state not in final:
                answer = client.get(f"{url}/v1/tasks/{task}", params={"wait": 300})
                state = answer.json()["state"]
            states[state] = states.get(state, 0) + 1
    return states


def _commits(dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def ankka_throughput(work: Path, store: str, tasks: int, concurrency: int) -> dict[str, Any]:
    model = standin(work / "throughput.json", script(tasks, "complete_task"))
    server = serve(model, store, "--max-instances", str(concurrency))
    postgres = store.startswith("postgres")
    try:
        names = [f"t{n:05d}" for n in range(tasks)]
        before = _commits(store) if postgres else 0
        started = time.perf_counter()
        asyncio.run(put_all(server.url, dict.fromkeys(names, BODY)))
        states = wait_final(server.url, names)
        seconds = time.perf_counter() - started
        iterations = served(model)
        after = _commits(store) if postgres else 0
    finally:
        server.stop()
        model.stop()
    result: dict[str, Any] = {"seconds": seconds, "iterations": iterations, "states": states}
    if postgres:
        result["transactions_per_iteration"] = round((after - before) / max(1, iterations), 2)
    return result


def floor(store: str, sessions: int) -> float:
    """The store's own durable appends/s, ``sessions`` appending at once (journal_append)."""
    from bench import journal_append

    async def measure() -> float:
        opened = await journal_append.open_store(store)
        try:
            line = await journal_append.shape(opened, "f", sessions, 30, opened.plain)
        finally:
            await opened.close()
        return float(line.split(":")[1].split("appends/s")[0])

    return asyncio.run(measure())


def dbos_throughput(work: Path, python: str, tasks: int, concurrency: int) -> dict[str, Any] | None:
    model = standin(work / "dbos.json", script(tasks, "final_result"))
    peer = Path(__file__).with_name("_dbos_peer.py")
    try:
        out = subprocess.run(
            [
                python,
                str(peer),
                "--url",
                model.url,
                "--tasks",
                str(tasks),
                "--concurrency",
                str(concurrency),
                "--db",
                str(work / "dbos.sqlite3"),
            ],
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
        )
        if out.returncode != 0:
            print(f"the DBOS peer failed:\n{out.stderr[-3000:]}", file=sys.stderr)
            return None
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        result["iterations"] = served(model)
    finally:
        model.stop()
    return result


def resume_latency(work: Path, kills: int) -> tuple[list[float], list[float]]:
    """Seconds from a restarted process's start (and from its listening line) to the stand-in
    receiving the call it resumes."""
    turns = [{**LOOKUP, "delay_ms": 60_000}] * (kills * 2 + 2)
    model = standin(work / "resume.json", turns)
    store = f"sqlite:///{work / 'resume.sqlite3'}"
    from_start: list[float] = []
    from_listening: list[float] = []
    try:
        for round_ in range(kills):
            first = serve(model, store)
            before = served(model)
            asyncio.run(put_all(first.url, {f"r{round_}": BODY}))
            while served(model) == before:
                time.sleep(0.005)
            first.process.kill()
            first.process.wait()
            asked = served(model)
            began = time.perf_counter()
            second = serve(model, store)
            listening = time.perf_counter()
            while served(model) == asked:
                time.sleep(0.002)
            resumed = time.perf_counter()
            from_start.append(resumed - began)
            from_listening.append(resumed - listening)
            httpx.post(f"{second.url}/v1/tasks/r{round_}/cancel", timeout=30)
            second.process.kill()
            second.process.wait()
    finally:
        model.stop()
    return from_start, from_listening


def cascade(work: Path, dependants: int) -> tuple[float, int]:
    """Seconds for cancelling a task that ``dependants`` tasks (a chain) depend on."""
    model = standin(work / "cascade.json", [{**LOOKUP, "delay_ms": 600_000}])
    server = serve(model, f"sqlite:///{work / 'cascade.sqlite3'}")
    try:
        bodies: dict[str, dict[str, Any]] = {"gate": BODY, "root": {**BODY, "depends_on": ["gate"]}}
        previous = "root"
        for n in range(dependants):
            bodies[f"d{n:05d}"] = {**BODY, "depends_on": [previous]}
            previous = f"d{n:05d}"
        for task, body in bodies.items():  # in order: each names one created before it
            asyncio.run(put_all(server.url, {task: body}, concurrency=1))
        began = time.perf_counter()
        httpx.post(f"{server.url}/v1/tasks/root/cancel", timeout=600).raise_for_status()
        seconds = time.perf_counter() - began
        last = httpx.get(f"{server.url}/v1/tasks/{previous}", timeout=30).json()["state"]
        cancelled = dependants if last == "cancelled" else 0
    finally:
        server.stop()
        model.stop()
    return seconds, cancelled


def _fresh_database(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE DATABASE floor")
    return dsn.rsplit("/", 1)[0] + "/floor"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--cascade", type=int, default=1000)
    parser.add_argument("--dbos-python", default=sys.executable)
    parser.add_argument("--skip-postgres", action="store_true")
    args = parser.parse_args()
    with open("/proc/loadavg") as load:
        print(f"load average before: {load.read().split()[:3]}")
    with tempfile.TemporaryDirectory(prefix="ankka-bench-tasks-") as tmp:
        work = Path(tmp)
        rates: dict[str, float] = {}
        sqlite = ankka_throughput(
            work, f"sqlite:///{work / 'tasks.sqlite3'}", args.tasks, args.concurrency
        )
        rates["ankka, SQLite"] = sqlite["iterations"] / sqlite["seconds"]
        print(f"ankka on SQLite: {sqlite}")
        floors = {"ankka, SQLite": floor(f"sqlite:///{work / 'floor.sqlite3'}", args.concurrency)}
        if not args.skip_postgres:
            with postgres_cluster(fsync=True) as dsn:
                pg = ankka_throughput(work, dsn, args.tasks, args.concurrency)
                floors["ankka, PostgreSQL"] = floor(_fresh_database(dsn), args.concurrency)
            rates["ankka, PostgreSQL"] = pg["iterations"] / pg["seconds"]
            print(f"ankka on PostgreSQL: {pg}")
        peer = dbos_throughput(work, args.dbos_python, args.tasks, args.concurrency)
        if peer is not None:
            rates["pydantic-ai + DBOS, SQLite"] = peer["iterations"] / peer["seconds"]
            print(f"pydantic-ai + DBOS: {peer}")
        print("\niterations/s (one process each):")
        for name, rate in rates.items():
            ratio = ""
            if peer is not None and not name.startswith("pydantic"):
                ratio = f"  ({rate / rates['pydantic-ai + DBOS, SQLite']:.2f}x the DBOS peer)"
            print(f"  {name:28} {rate:8.1f}{ratio}")
        print(f"\nthe floor: the store's durable appends/s, {args.concurrency} sessions at once:")
        for name, appends in floors.items():
            print(f"  {name:28} {appends:8.0f}  (iterations/s = {rates[name] / appends:.3f}x it)")
        from_start, from_listening = resume_latency(work, args.kills)
        print(
            f"\nrestart -> first resumed iteration over {args.kills} kills: "
            f"from process start p50 {statistics.median(from_start):.3f}s "
            f"p99 {_percentile(from_start, 0.99):.3f}s; from listening p50 "
            f"{statistics.median(from_listening):.3f}s p99 {_percentile(from_listening, 0.99):.3f}s"
        )
        seconds, cancelled = cascade(work, args.cascade)
        print(
            f"cascade cancel of {args.cascade} dependants: {seconds:.3f}s ({cancelled} cancelled)"
        )
    with open("/proc/loadavg") as load:
        print(f"load average after: {load.read().split()[:3]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
