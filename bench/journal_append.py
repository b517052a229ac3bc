"""Durable journal appends on SQLite: one session alone, then many sessions at once.

Each append is one turn's two messages (about 250 bytes each), committed with ``synchronous=FULL``
before it returns, as a turn's is. Printed per shape: appends per second, p50/p99 latency of an
append, and how many appends shared a commit (the store's group commit: appends that arrive
while a commit is on its way to disk share the next one). No model, no HTTP: the store alone.

Run: ``python bench/journal_append.py`` (from a checkout: it imports ankka from the current
directory).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())

from ankka.runtime.store.sqlite import SqliteStore

BODY = '{"content":"' + "x" * 200 + '","agent":"a","turn":"t"}'


async def shape(directory: Path, sessions: int, each: int) -> str:
    store = await SqliteStore.open(directory / f"journal-{sessions}.sqlite3")
    before = getattr(store, "commits", None)

    async def one(session: str) -> list[float]:
        latencies: list[float] = []
        for n in range(each):
            started = time.perf_counter()
            events = [("user_message", BODY), ("assistant_message", BODY)]
            await store.append(session, events, expected=2 * n)
            latencies.append(time.perf_counter() - started)
        return latencies

    began = time.perf_counter()
    per_session = await asyncio.gather(*(one(f"s{n}") for n in range(sessions)))
    wall = time.perf_counter() - began
    after = getattr(store, "commits", None)
    await store.close()
    latencies = sorted(x for session in per_session for x in session)
    total = len(latencies)
    shared = "n/a" if before is None or after is None else f"{total / (after - before):.1f}"
    p50 = latencies[total // 2] * 1000
    p99 = latencies[min(total - 1, int(total * 0.99))] * 1000
    return (
        f"{sessions:>3} sessions x {each}: {total / wall:7.0f} appends/s, "
        f"p50 {p50:6.2f} ms, p99 {p99:6.2f} ms, appends per commit {shared}"
    )


async def main(sessions: int, each: int, alone: int) -> None:
    with tempfile.TemporaryDirectory(prefix="ankka-bench-") as directory:
        print(await shape(Path(directory), 1, alone))
        print(await shape(Path(directory), sessions, each))
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=32, help="sessions appending at once")
    parser.add_argument("--appends", type=int, default=30, help="appends per session")
    parser.add_argument("--alone", type=int, default=300, help="appends of the lone session")
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.appends, args.alone))
