"""The task store: the same suite on SQLite and PostgreSQL (a private cluster)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ankka._kernel.errors import NotFound, RequestError
from ankka.runtime.declare.policy import SessionPolicy
from ankka.runtime.records.messages import Usage
from ankka.runtime.records.tasks import (
    Conflict,
    InstanceState,
    TaskRecord,
    TaskSpec,
    TaskState,
    own_instance_id,
)
from ankka.runtime.store import task_statements as statements
from ankka.runtime.store.open import Store
from ankka.runtime.store.readable import readers
from ankka.runtime.store.tasks import Ended, Picked, TaskStore, Transaction

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
OpenStore = Callable[[], Awaitable[Store]]


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> OpenStore:
    """Opens the same store (file or database) each time it is called."""
    if request.param == "sqlite":

        async def open_sqlite() -> Store:
            return await Store.open(tmp_path / "tasks.sqlite3")

        return open_sqlite
    dsn: str = request.getfixturevalue("postgres_server")
    database = f"tasks_{uuid.uuid4().hex[:12]}"
    created: list[str] = []

    async def open_postgres() -> Store:
        if not created:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                await conn.execute(f"CREATE DATABASE {database}")
            created.append(database)
        return await Store.open(dsn.rsplit("/", 1)[0] + f"/{database}")

    return open_postgres


@pytest.fixture
async def store(open_store: OpenStore) -> AsyncIterator[TaskStore]:
    opened = await open_store()
    yield opened.tasks
    await opened.close()


def spec(text: str = "summarise", deps: tuple[str, ...] = ()) -> TaskSpec:
    return TaskSpec("researcher", "summary", text, depends_on=deps)


async def put(
    store: TaskStore, task: str, body: TaskSpec | None = None, instance: str | None = "i1"
) -> tuple[TaskRecord, bool, list[Ended]]:
    result: tuple[TaskRecord, bool, list[Ended]] = await store.write(
        lambda tx: statements.put(
            tx,
            task,
            body or spec(),
            instance=instance,
            budget=5,
            created_by="local",
            may_read=statements.read_any,
            now=NOW,
        )
    )
    return result


async def get(store: TaskStore, task: str) -> TaskRecord:
    found: TaskRecord | None = await store.read(lambda tx: statements.get(tx, task))
    assert found is not None
    return found


async def fail(store: TaskStore, task: str) -> list[Ended]:
    ended: list[Ended] = await store.write(
        lambda tx: statements.finish(tx, task, TaskState.FAILED, reason="broken", now=NOW)
    )
    return ended


async def test_a_task_survives_reopening_with_what_was_said(open_store: OpenStore) -> None:
    opened = await open_store()
    store = opened.tasks
    record, created, _ = await put(store, "t1")
    assert created and record.state == TaskState.ASSIGNED and record.instance == "i1"
    await opened.close()
    opened = await open_store()
    store = opened.tasks
    try:
        again = await get(store, "t1")
        assert again.spec == spec() and again.budget == 5 and again.created_at == NOW
    finally:
        await opened.close()


NEW_INDEXES = (
    "ankka_tasks_by_seq",
    "ankka_instances_by_state",
    "ankka_instances_by_owner",
    "ankka_tasks_live",
)


def _indexes(tx: Transaction, postgres: bool) -> set[str]:
    if postgres:
        rows = tx.rows("SELECT indexname FROM pg_indexes WHERE tablename LIKE ?", ("ankka_%",))
    else:
        rows = tx.rows("SELECT name FROM sqlite_master WHERE type = 'index'")
    return {str(r[0]) for r in rows}


async def test_a_store_written_before_the_hot_indexes_opens_and_gains_them(
    open_store: OpenStore,
) -> None:
    opened = await open_store()
    store = opened.tasks
    postgres = store.shared
    await put(store, "t1")
    await put(store, "t2", instance="i2")

    def as_before(tx: Transaction) -> None:  # the schema before the indexes
        for name in NEW_INDEXES:
            tx.rows(f"DROP INDEX {name}")

    await store.write(as_before)
    assert not set(NEW_INDEXES) & await store.read(lambda tx: _indexes(tx, postgres))
    await opened.close()
    opened = await open_store()
    store = opened.tasks
    try:
        assert set(NEW_INDEXES) <= await store.read(lambda tx: _indexes(tx, postgres))
        assert (await get(store, "t1")).spec == spec()
        work: list[Any] = await store.read(statements.with_work)
        assert work == [("researcher", "i1"), ("researcher", "i2")]
        third, _, _ = await put(store, "t3")
        second = await get(store, "t2")
        assert third.assigned_seq is not None and second.assigned_seq is not None
        assert third.assigned_seq > second.assigned_seq
    finally:
        await opened.close()


async def test_the_same_body_again_is_idempotent_and_a_different_one_conflicts(
    store: TaskStore,
) -> None:
    first, created, _ = await put(store, "t1")
    second, created_again, _ = await put(store, "t1")
    assert created and not created_again and second == first
    with pytest.raises(Conflict, match="different body"):
        await put(store, "t1", spec("something else"))


async def test_an_unknown_dependency_is_refused_by_name(store: TaskStore) -> None:
    with pytest.raises(RequestError, match="'ghost', which does not exist"):
        await put(store, "t1", spec(deps=("ghost",)))
    assert await store.read(lambda tx: statements.get(tx, "t1")) is None


async def test_a_task_without_an_instance_gets_one_that_ends_with_it(store: TaskStore) -> None:
    record, _, _ = await put(store, "solo", instance=None)
    assert record.instance == own_instance_id("solo") and record.own_instance
    await fail(store, "solo")
    found = await store.read(lambda tx: statements.get_instance(tx, "researcher", "task.solo"))
    assert found is not None and found.state == InstanceState.ENDED


async def test_a_failure_cancels_dependants_three_levels_deep_in_one_change(
    store: TaskStore,
) -> None:
    await put(store, "root")
    await put(store, "a", spec(deps=("root",)))
    await put(store, "b", spec(deps=("a",)))
    await put(store, "c", spec(deps=("b", "root")))
    await put(store, "other")
    ended = await fail(store, "root")
    assert [(e.id, e.state) for e in ended] == [
        ("root", TaskState.FAILED),
        ("a", TaskState.CANCELLED),
        ("c", TaskState.CANCELLED),
        ("b", TaskState.CANCELLED),
    ]
    assert (await get(store, "b")).reason == "it depends on 'root', which was failed"
    assert (await get(store, "other")).state == TaskState.ASSIGNED


async def test_a_task_created_on_a_failed_dependency_is_cancelled_at_once(
    store: TaskStore,
) -> None:
    await put(store, "root")
    await fail(store, "root")
    record, created, ended = await put(store, "late", spec(deps=("root",)))
    assert created and record.state == TaskState.CANCELLED
    assert record.reason == "its dependency 'root' was failed"
    assert [e.id for e in ended] == ["late"]


async def test_an_instance_picks_in_order_letting_a_ready_task_go_first(store: TaskStore) -> None:
    await put(store, "dep", instance="other")
    await put(store, "waits", spec(deps=("dep",)))
    await put(store, "ready")
    picked: Picked = await store.read(lambda tx: statements.pick(tx, "researcher", "i1"))
    assert picked.task is not None and picked.task.id == "ready"
    assert [t.id for t in picked.waiting] == ["waits"]


async def test_iterations_and_usage_are_counted_once_per_iteration(store: TaskStore) -> None:
    await put(store, "t1")
    for _ in range(2):  # the second is a restart recording the same iteration again
        await store.write(lambda tx: statements.complete_iteration(tx, "t1", 1, Usage(10, 2), NOW))
    await store.write(lambda tx: statements.complete_iteration(tx, "t1", 2, Usage(5, 1), NOW))
    record = await get(store, "t1")
    assert record.iterations_used == 2 and record.usage == Usage(15, 3)


async def test_a_final_task_is_never_changed_again(store: TaskStore) -> None:
    await put(store, "t1")
    await store.write(
        lambda tx: statements.finish(tx, "t1", TaskState.COMPLETED, result={"x": 1}, now=NOW)
    )
    assert await fail(store, "t1") == []
    changed = await store.write(lambda tx: statements.update(tx, "t1", NOW, state="in-progress"))
    assert changed is None
    record = await get(store, "t1")
    assert record.state == TaskState.COMPLETED and record.result == {"x": 1}


async def test_cancelling_a_working_task_waits_for_its_iteration(store: TaskStore) -> None:
    await put(store, "t1")
    await store.write(lambda tx: statements.update(tx, "t1", NOW, state="in-progress", started=1))
    record, ended = await store.write(lambda tx: statements.cancel(tx, "t1", NOW))
    assert ended == [] and record.cancel_requested and record.state == TaskState.IN_PROGRESS
    await put(store, "t2")
    record, ended = await store.write(lambda tx: statements.cancel(tx, "t2", NOW))
    assert record.state == TaskState.CANCELLED and [e.id for e in ended] == ["t2"]
    with pytest.raises(NotFound):
        await store.write(lambda tx: statements.cancel(tx, "ghost", NOW))


async def test_terminating_puts_tasks_back_unassigned_and_retires_the_id(
    store: TaskStore,
) -> None:
    await put(store, "t1")
    await store.write(
        lambda tx: statements.set_instance(tx, "researcher", "i1", InstanceState.TERMINATED, NOW)
    )
    record = await get(store, "t1")
    assert record.state == TaskState.PENDING and record.instance is None
    with pytest.raises(Conflict, match="never used again"):
        await put(store, "t2", instance="i1")
    reassigned, created, _ = await put(store, "t1", instance="i2")
    assert not created and reassigned.state == TaskState.ASSIGNED and reassigned.instance == "i2"


async def test_only_active_instances_with_unfinished_tasks_have_work(store: TaskStore) -> None:
    await put(store, "t1", instance="busy")
    await put(store, "t2", instance="resting")
    await put(store, "t3", instance="done")
    await store.write(
        lambda tx: statements.set_instance(
            tx, "researcher", "resting", InstanceState.SUSPENDED, NOW
        )
    )
    await fail(store, "t3")
    work: list[Any] = await store.read(statements.with_work)
    assert work == [("researcher", "busy")]


# with_work as it was written before the ankka_tasks_live index: a join over every task.
JOINED_WITH_WORK = (
    "SELECT DISTINCT i.agent, i.id FROM ankka_instances i JOIN ankka_tasks t "
    "ON t.agent = i.agent AND t.instance = i.id WHERE i.state = 'active' "
    "AND t.state NOT IN ('completed', 'failed', 'cancelled', 'pending') "
    "ORDER BY i.agent, i.id"
)


async def test_with_work_answers_as_the_join_did_and_reads_the_live_tasks_index(
    store: TaskStore,
) -> None:
    postgres = store.shared
    states = list(TaskState)

    def fill(tx: Transaction) -> None:
        for n in range(64):
            task, instance = f"t{n}", f"i{n % 12}"
            statements.put(
                tx,
                task,
                spec(f"x{n}"),
                instance=instance,
                budget=5,
                created_by="local",
                may_read=statements.read_any,
                now=NOW,
            )
            statements.update(tx, task, NOW, state=states[n % len(states)].value)
        for instance, state in (("i3", InstanceState.SUSPENDED), ("i5", InstanceState.ENDED)):
            statements.set_instance(tx, "researcher", instance, state, NOW)

    await store.write(fill)
    work: list[Any] = await store.read(statements.with_work)
    joined = await store.read(lambda tx: [(r[0], r[1]) for r in tx.rows(JOINED_WITH_WORK)])
    assert work == joined
    assert ("researcher", "i3") not in work and ("researcher", "i5") not in work
    assert len(work) >= 6, work  # live tasks on most active instances, not an empty answer

    def plan(tx: Transaction) -> str:
        # Which indexes the query can use: with sequential scans priced out (this transaction
        # only), a partial index whose predicate the query does not imply would not appear.
        sql = statements.WITH_WORK
        if postgres:
            tx.rows("SET LOCAL enable_seqscan = off")
            return "\n".join(str(r[0]) for r in tx.rows(f"EXPLAIN {sql}"))
        return "\n".join(str(r[-1]) for r in tx.rows(f"EXPLAIN QUERY PLAN {sql}"))

    # In a transaction (a write that changes nothing): PostgreSQL's reads are autocommitted,
    # where SET LOCAL would not hold.
    shown = await store.write(plan, serial=False)
    assert "ankka_tasks_live" in shown, shown
    assert "Seq Scan on ankka_tasks" not in shown and "SCAN t" not in shown, shown


async def test_a_lease_is_held_by_one_owner_until_it_expires(store: TaskStore) -> None:
    await put(store, "t1")
    claim = statements.claim
    assert await store.write(lambda tx: claim(tx, "researcher", "i1", "p1", 100.0, 50.0))
    assert not await store.write(lambda tx: claim(tx, "researcher", "i1", "p2", 160.0, 60.0))
    assert await store.write(lambda tx: claim(tx, "researcher", "i1", "p1", 110.0, 60.0))
    renewed = await store.write(lambda tx: statements.renew(tx, "p1", 120.0))
    assert renewed == [("researcher", "i1")]
    assert await store.write(lambda tx: claim(tx, "researcher", "i1", "p2", 200.0, 121.0))
    assert await store.write(lambda tx: statements.renew(tx, "p1", 130.0)) == []


async def test_the_task_listing_holds_only_what_the_caller_may_read_newest_first_by_cursor(
    store: TaskStore,
) -> None:
    """Issue 31, item 3: the caller's read right is a condition of the query, so bob's many
    tasks never crowd alice's out of a page; the console's filters are conditions too."""

    async def made(task: str, by: str) -> None:
        await store.write(
            lambda tx: statements.put(
                tx, task, spec(task), instance=None, budget=5,
                created_by=by, may_read=statements.read_any, now=NOW,
            )
        )  # fmt: skip

    for n in range(30):
        await made(f"bob-{n:02}", "bob")
    for n in range(3):
        await made(f"alice-{n}", "alice")
    policy = SessionPolicy()

    async def listed(
        caller: str, limit: int, after: tuple[str, str] | None = None, **matching: str
    ) -> list[str]:
        who = readers(policy, caller)
        found: list[TaskRecord] = await store.read(
            lambda tx: statements.recent(tx, limit, who=who, after=after, matching=matching)
        )
        return [r.id for r in found]

    assert await listed("alice", 2) == ["alice-2", "alice-1"]  # same time: by id, newest first
    assert await listed("alice", 2, after=(NOW.isoformat(), "alice-1")) == ["alice-0"]
    await fail(store, "alice-1")
    assert await listed("alice", 50, state="failed") == ["alice-1"]
    every = ["alice-2", "alice-1", "alice-0"]
    assert await listed("alice", 50, agent="researcher", type="summary") == every
    assert await listed("alice", 50, type="other") == []
    assert len(await listed("bob", 50)) == 30 and not any(
        i.startswith("alice") for i in await listed("bob", 50)
    )
    assert len(await listed("ankka://platform/op", 50)) == 33
    assert await listed("alice", 50, agent="nobody") == []
