"""The cold fold: a session's fold built from nothing (after a restart or a fold-cache miss).

A session of N messages (weather-agent turns: the question, an answer calling a tool, the
tool's result, the final answer with the turn's usage; about 250 bytes each) is written to a
SQLite store, then the host folds it from position 0, as it does when the session is not in
its fold cache. Printed per size: the fold's p50 in process CPU time (every thread's: the
store reads on its own), and of its parts, the store's read and decoding the records into
values (the rest is the host's bookkeeping), then the fold's p50 wall time. CPU time, not wall
time, is the cost: on a loaded machine the wall time is mostly waiting for a core.

With ``--before PATH`` (a checkout of the baseline, e.g. ``git worktree add --detach
/tmp/cf-before main``) the same measurement runs in that tree and this one, alternated round
by round in fresh processes so outside load falls on both, and the two are printed side by side.

With ``--postgres`` the store is PostgreSQL (a private cluster, as the tests start; its
server's CPU is not counted, only this process's).

Run: ``python bench/cold_fold.py [--before /tmp/cf-before] [--postgres]`` from a checkout (it
imports ankka from the current directory; ``--worker`` is the measuring process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

if __name__ == "__main__" and "--worker" in sys.argv:
    sys.path.insert(0, os.getcwd())


def _turn_records(n: int) -> list[Any]:
    from ankka.runtime.records.messages import (
        AssistantMessage,
        ModelCall,
        ToolCall,
        ToolResult,
        Usage,
        UserMessage,
    )

    turn = f"turn-{n:05d}"
    usage = Usage(412 + n, 23, 384, 0)
    call = ModelCall("openai", "gpt-4.1-mini", "weather", 231.457, usage)
    asked = ToolCall(f"call_{n:08d}", "get_weather", '{"city": "Helsinki", "unit": "celsius"}')
    return [
        UserMessage(f"What is the weather in Helsinki today? (question {n})", "weather", turn),
        AssistantMessage(None, (asked,), "weather", turn, call),
        ToolResult(
            asked.id,
            "get_weather",
            '{"temperature": -3, "sky": "snow", "wind_ms": 4.5}',
            False,
            "weather",
            turn,
        ),
        AssistantMessage(
            "It is −3 °C in Helsinki with light snow and a 4.5 m/s wind: dress warmly.",
            (),
            "weather",
            turn,
            call,
            usage + usage,
        ),
    ]


async def _open(store: str) -> Any:
    from ankka.runtime.store.journal import Journal

    try:
        from tests.support.stores import journal_store
    except ImportError:  # a checkout from before the one Store (compared runs)
        import importlib

        opener = importlib.import_module("ankka.runtime.store.open").open_store
        return Journal(await opener(store))
    return Journal(await journal_store(store))


async def _write(store: str, session: str, messages: int) -> None:
    async with await _open(store) as journal:
        position = 0
        for n in range(messages // 4):
            position = await journal.append(session, _turn_records(n), expected=position)


async def _measure(store_url: str, session: str, rounds: int) -> dict[str, float]:
    from ankka.runtime.engine.session import SessionCache

    parts: dict[str, list[float]] = {"wall": [], "fold": [], "read": [], "decode": []}
    cpu = time.process_time  # the process's CPU, every thread's: the store's reader is one
    async with await _open(store_url) as journal:
        store = journal.store
        for _ in range(rounds):
            began, began_cpu = time.perf_counter(), cpu()
            await SessionCache(journal, 1).load(session)
            parts["fold"].append(cpu() - began_cpu)
            parts["wall"].append(time.perf_counter() - began)
            began = cpu()
            await store.read(session)
            parts["read"].append(cpu() - began)
            began = cpu()
            await journal.read(session)
            parts["decode"].append(cpu() - began - parts["read"][-1])
    return {k: statistics.median(v) * 1000 for k, v in parts.items()}


def worker(messages: int, rounds: int, dsn: str | None) -> None:
    session = f"cold-fold-{uuid.uuid4().hex}"  # workers may share one PostgreSQL database
    with tempfile.TemporaryDirectory(prefix="ankka-cold-fold-") as directory:
        store = dsn or f"sqlite:///{Path(directory) / 'journal.sqlite3'}"
        asyncio.run(_write(store, session, messages))
        print(json.dumps(asyncio.run(_measure(store, session, rounds))))


def _run(tree: Path, messages: int, rounds: int, dsn: str | None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [sys.executable, __file__, "--worker", "--messages", str(messages)]
    args += ["--dsn", dsn] if dsn else []
    out = subprocess.run(
        [*args, "--rounds", str(rounds)],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,800,1600", help="messages per session")
    parser.add_argument("--rounds", type=int, default=30, help="folds measured per process")
    parser.add_argument("--repeat", type=int, default=3, help="processes per tree and size")
    parser.add_argument("--before", type=Path, help="a baseline checkout to compare with")
    parser.add_argument(
        "--postgres", action="store_true", help="fold from a private PostgreSQL cluster instead"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    parser.add_argument("--messages", type=int, default=800, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.messages, args.rounds, args.dsn)
        return
    if args.postgres:
        sys.path.insert(0, os.getcwd())
        from tests.support.postgres import postgres_cluster

        with postgres_cluster() as dsn:
            compare(args, dsn)
    else:
        compare(args, None)


def compare(args: argparse.Namespace, dsn: str | None) -> None:
    trees = {"after": Path.cwd()}
    if args.before is not None:
        trees = {"before": args.before.resolve(), **trees}
    names = list(trees)
    print(
        "messages | "
        + " | ".join(f"{n}: fold CPU ms (read + decode)" for n in names)
        + (" | after ÷ before" if len(names) == 2 else "")
        + " | "
        + " | ".join(f"{n}: wall ms" for n in names)
    )
    for size in (int(s) for s in args.sizes.split(",")):
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for _ in range(args.repeat):  # alternate: outside load falls on both trees
            for name, tree in trees.items():
                runs[name].append(_run(tree, size, args.rounds, dsn))
        part = {n: {k: statistics.median(r[k] for r in runs[n]) for k in runs[n][0]} for n in names}
        cells = [f"{p['fold']:6.2f} ({p['read']:.2f} + {p['decode']:.2f})" for p in part.values()]
        if len(names) == 2:
            cells.append(f"{part['after']['fold'] / part['before']['fold']:.2f}")
        cells += [f"{p['wall']:6.2f}" for p in part.values()]
        print(f"{size:>8} | " + " | ".join(cells))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
