"""The store's own durable appends: the floor every durable figure of the runtime stands on.

Each append is one turn's two messages (about 250 bytes each), committed durably before it
returns, as a turn's is: SQLite in WAL mode with ``synchronous=FULL``; PostgreSQL from
Debian's server with ``fsync`` on (a private cluster this run starts). Shapes, per store:

- one session alone: appends back to back (the latency of one durable commit);
- N sessions at once (``--sessions``), each appending back to back: what the store commits
  when many writers wait together (SQLite's group commit; PostgreSQL's pool);
- the same with each append followed by a task row's change (what an iteration's response
  commits): apart, one write after the other (an append, then ``complete_iteration``), and in
  one transaction (``Journal.commit(..., then=complete_iteration)``), where the checkout has
  it.

Printed per shape: appends per second, p50/p99 latency, and on SQLite how many appends shared
a commit. No model, no HTTP: the store alone. The task throughput bench
(``bench/task_throughput.py``) reports its iterations as a fraction of the many-sessions
figure.

Run: ``python bench/journal_append.py [--stores sqlite,postgres]`` from a checkout (it imports
ankka from the current directory, so a checkout from before the one Store measures too).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, os.getcwd())

from tests.support.postgres import postgres_cluster

BODY = '{"content":"' + "x" * 200 + '","agent":"a","turn":"t"}'
EVENTS = [("user_message", BODY), ("assistant_message", BODY)]

Append = Callable[[str, int], Awaitable[int]]


class Opened:
    """The store under test, through whichever API the checkout has."""

    def __init__(self, store: Any, journal: Any, close: Callable[[], Awaitable[None]]) -> None:
        self.store, self.journal, self.close = store, journal, close

    @property
    def commits(self) -> int | None:
        database = getattr(self.store, "database", self.journal)
        value = getattr(database, "commits", None)
        return value if isinstance(value, int) else None

    async def plain(self, session: str, at: int) -> int:
        position: int = await self.journal.append(session, EVENTS, expected=at)
        return position

    async def with_task(self, session: str, at: int) -> int:
        done = await self.journal.commit(
            session, EVENTS, expected=at, then=_completion(session, at)
        )
        position: int = done.position
        return position

    async def then_task(self, session: str, at: int) -> int:
        position = await self.plain(session, at)
        await self.store.tasks.write(_completion(session, at), serial=False)
        return position


def _completion(task: str, at: int) -> Any:
    """The change an iteration's completion makes to its task's row."""
    from ankka.runtime.records.messages import Usage
    from ankka.runtime.store import task_statements as statements

    return partial(
        statements.complete_iteration,
        task=task,
        number=at // 2 + 1,
        usage=Usage(10, 5),
        now=datetime.now(UTC),
    )


async def open_store(url: str) -> Opened:
    try:
        from ankka.runtime.store.open import Store
    except ImportError:  # a checkout from before the one Store: the journal's own store
        from ankka.runtime.store.open import open_store as old_open

        journal = await old_open(url)
        return Opened(None, journal, journal.close)
    store = await Store.open(url)
    return Opened(store, store.journal_store, store.close)


async def seed_tasks(opened: Opened, prefix: str, sessions: int) -> None:
    """One task per session (named as the session), for the shapes that update one."""
    from ankka.runtime.records.tasks import TaskSpec
    from ankka.runtime.store import task_statements as statements

    now = datetime.now(UTC)

    def put(tx: Any) -> None:
        for n in range(sessions):
            spec = TaskSpec("bench", "summary", f"x{n}")
            task = f"{prefix}{n}"
            statements.put(
                tx,
                task,
                spec,
                instance=None,
                budget=10**6,
                created_by="b",
                may_read=statements.read_any,
                now=now,
            )

    await opened.store.tasks.write(put)


async def shape(opened: Opened, prefix: str, sessions: int, each: int, append: Append) -> str:
    before = opened.commits

    async def one(session: str) -> list[float]:
        latencies: list[float] = []
        for n in range(each):
            started = time.perf_counter()
            await append(session, 2 * n)
            latencies.append(time.perf_counter() - started)
        return latencies

    began = time.perf_counter()
    per_session = await asyncio.gather(*(one(f"{prefix}{n}") for n in range(sessions)))
    wall = time.perf_counter() - began
    after = opened.commits
    latencies = sorted(x for session in per_session for x in session)
    total = len(latencies)
    shared = "n/a" if before is None or after is None else f"{total / (after - before):.1f}"
    p50 = latencies[total // 2] * 1000
    p99 = latencies[min(total - 1, int(total * 0.99))] * 1000
    return (
        f"{sessions:>3} sessions x {each}: {total / wall:7.0f} appends/s, "
        f"p50 {p50:6.2f} ms, p99 {p99:6.2f} ms, appends per commit {shared}"
    )


async def measure(name: str, url: str, sessions: int, each: int, alone: int) -> None:
    opened = await open_store(url)
    try:
        print(f"{name}, one session alone:   {await shape(opened, 'a', 1, alone, opened.plain)}")
        print(
            f"{name}, sessions at once:    {await shape(opened, 'm', sessions, each, opened.plain)}"
        )
        if opened.store is not None and hasattr(opened.journal, "commit"):
            await seed_tasks(opened, "c", sessions)
            await seed_tasks(opened, "p", sessions)
            apart = await shape(opened, "p", sessions, each, opened.then_task)
            print(f"{name}, then a task's row:   {apart}")
            combined = await shape(opened, "c", sessions, each, opened.with_task)
            print(f"{name}, with a task's row:   {combined}")
    finally:
        await opened.close()


async def main(stores: list[str], sessions: int, each: int, alone: int) -> None:
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    if "sqlite" in stores:
        with tempfile.TemporaryDirectory(prefix="ankka-bench-") as directory:
            url = f"sqlite:///{Path(directory) / 'journal.sqlite3'}"
            await measure("sqlite", url, sessions, each, alone)
    if "postgres" in stores:
        with postgres_cluster(fsync=True) as dsn:
            await measure("postgres", dsn, sessions, each, alone)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite,postgres", help="sqlite, postgres or both")
    parser.add_argument("--sessions", type=int, default=32, help="sessions appending at once")
    parser.add_argument("--appends", type=int, default=30, help="appends per session")
    parser.add_argument("--alone", type=int, default=300, help="appends of the lone session")
    args = parser.parse_args()
    asyncio.run(main(args.stores.split(","), args.sessions, args.appends, args.alone))
