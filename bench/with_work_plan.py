"""The scheduler's ``with_work`` on PostgreSQL at a few thousand tasks: its plan and time as it
was (the join, no ``ankka_tasks_live``) and as it is, alternated on one database.

The store holds ``--tasks`` tasks, four to an instance, one in ten being worked and the rest
completed or failed. Run: ``python bench/with_work_plan.py [--tasks 4000] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ankka.runtime.records.tasks import TaskSpec, TaskState
from ankka.runtime.store import task_statements as statements
from ankka.runtime.store.open import Store
from ankka.runtime.store.tasks import LIVE_EXCLUDED, Transaction
from tests.support.postgres import postgres_cluster
from tests.unit.runtime.store.test_tasks import JOINED_WITH_WORK

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
LIVE_INDEX = (
    "CREATE INDEX ankka_tasks_live ON ankka_tasks (agent, instance) "
    f"WHERE state NOT IN {LIVE_EXCLUDED}"
)


def fill(tx: Transaction, tasks: int) -> None:
    for n in range(tasks):
        task = f"t{n}"
        body = TaskSpec("researcher", "summary", f"x{n}")
        statements.put(
            tx,
            task,
            body,
            instance=f"i{n // 4}",
            budget=5,
            created_by="b",
            may_read=statements.read_any,
            now=NOW,
        )
        if n % 10:
            done = TaskState.COMPLETED if n % 3 else TaskState.FAILED
            statements.finish(tx, task, done, reason=None, now=NOW)


def explain(conn: psycopg.Connection[tuple[str]], sql: str) -> list[str]:
    return [str(row[0]) for row in conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {sql}")]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with postgres_cluster() as dsn:
        async with await Store.open(dsn) as store:
            await store.tasks.write(lambda tx: fill(tx, args.tasks))
        with psycopg.connect(dsn, autocommit=True) as conn:
            for round_ in range(args.rounds):
                conn.execute("DROP INDEX IF EXISTS ankka_tasks_live")
                conn.execute("ANALYZE")
                before = explain(conn, JOINED_WITH_WORK)
                conn.execute(LIVE_INDEX)
                conn.execute("ANALYZE")
                after = explain(conn, statements.WITH_WORK)
                if round_ == 0:
                    print("== before: the join, no ankka_tasks_live", *before, sep="\n")
                    print("== after", *after, sep="\n")
                print(f"round {round_}: before {before[-1]} | after {after[-1]}")


if __name__ == "__main__":
    asyncio.run(main())
