"""Priorities on a real store, SQLite and PostgreSQL: the backlog's own transactions, as the
team host runs them. A member claims the highest-priority ready item it accepts first, ties
in the order added; re-prioritising a ready item changes which is claimed next; an ended
item's priority is not changed (409); an item depending on one its creator may not read is
refused as one depending on a missing item."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest

from ankka._kernel.errors import RequestError
from ankka.runtime.records.tasks import Conflict
from ankka.runtime.store import team_statements as backlog
from ankka.runtime.store.open import Store
from ankka.runtime.store.tasks import create_tables
from ankka.runtime.store.team_statements import Claimed, Grant, ItemBody
from tests.support.stores import store_url

pytestmark = pytest.mark.integration

TEAM = "crew"
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
ACCEPTS = {"summary": Grant(2, None)}


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(store_url(request, tmp_path, "prio")) as opened:
        await create_tables(opened.tasks, backlog.SCHEMA)
        yield opened


def read_any(creator: str) -> bool:
    return True


async def add(
    store: Store,
    item: str,
    priority: int = 0,
    *,
    created_by: str = "local",
    depends_on: tuple[str, ...] = (),
) -> backlog.Item:
    body = ItemBody("summary", f"Summarise {item}.", depends_on, priority=priority)
    made, created = await store.tasks.write(
        lambda tx: backlog.put(
            tx, TEAM, item, body, created_by=created_by, may_read=read_any, now=NOW
        )
    )
    assert created
    return made


async def claim(store: Store, instance: str) -> str:
    """What the member instance ``instance`` (a fresh one each time) claims next."""
    done = await store.tasks.write(
        lambda tx: backlog.claim_next(
            tx,
            TEAM,
            member=("researcher", instance),
            owner="local",
            until=NOW.timestamp() + 60,
            accepts=ACCEPTS,
            budget=(None, None),
            now=NOW,
        )
    )
    assert isinstance(done, Claimed), done
    return done.item.id


async def test_the_highest_priority_is_claimed_first_ties_in_the_order_added(
    store: Store,
) -> None:
    await add(store, "low")
    await add(store, "urgent-1", priority=5)
    await add(store, "later", priority=-1)
    await add(store, "urgent-2", priority=5)
    claimed = [await claim(store, f"team.crew.x.{k}") for k in range(4)]
    assert claimed == ["urgent-1", "urgent-2", "low", "later"]


async def test_reprioritising_a_ready_item_changes_which_is_claimed_next(store: Store) -> None:
    await add(store, "first")
    await add(store, "second")
    moved = await store.tasks.write(lambda tx: backlog.reprioritise(tx, TEAM, "second", 3, NOW))
    assert moved.priority == 3
    assert moved.body.priority == 0  # as it was given: a body sent again still matches
    assert await claim(store, "team.crew.x.0") == "second"
    again, created = await store.tasks.write(
        lambda tx: backlog.put(
            tx, TEAM, "second", ItemBody("summary", "Summarise second."), created_by="local",
            may_read=read_any, now=NOW,
        )
    )  # fmt: skip
    assert not created and again.priority == 3


async def test_an_ended_items_priority_is_not_changed(store: Store) -> None:
    await add(store, "gone")
    await store.tasks.write(lambda tx: backlog.cancel(tx, TEAM, "gone", NOW))
    with pytest.raises(Conflict, match="is cancelled"):
        await store.tasks.write(lambda tx: backlog.reprioritise(tx, TEAM, "gone", 9, NOW))
    with pytest.raises(RequestError, match="out of range"):
        await store.tasks.write(lambda tx: backlog.reprioritise(tx, TEAM, "nowhere", 10**12, NOW))


async def test_a_leads_task_hears_of_its_items_ends_until_told(store: Store) -> None:
    """(The lead's news, on the same real stores: ``news`` and ``told``.)"""
    body = ItemBody("summary", "Summarise planned.")
    planned = partial(backlog.put, created_by="local", may_read=read_any, now=NOW)
    await store.tasks.write(lambda tx: planned(tx, TEAM, "planned", body, planned_by="lead-task"))
    await add(store, "not-planned")
    assert await store.tasks.read(lambda tx: backlog.news(tx, "lead-task")) == []  # not ended
    for item in ("planned", "not-planned"):
        await store.tasks.write(partial(backlog.cancel, team=TEAM, item=item, now=NOW))
    ended = await store.tasks.read(lambda tx: backlog.news(tx, "lead-task"))
    assert [(i.id, i.state) for i in ended] == [("planned", "cancelled")]
    await store.tasks.write(lambda tx: backlog.told(tx, "lead-task", ended, NOW))
    assert await store.tasks.read(lambda tx: backlog.news(tx, "lead-task")) == []


async def test_a_dependency_its_creator_may_not_read_is_answered_as_a_missing_one(
    store: Store,
) -> None:
    await add(store, "alices", created_by="alice")

    def bob_reads(creator: str) -> bool:
        return creator == "bob"

    async def bob_adds(item: str, dependency: str) -> str:
        body = ItemBody("summary", "Summarise more.", (dependency,))
        with pytest.raises(RequestError) as refused:
            await store.tasks.write(
                lambda tx: backlog.put(
                    tx, TEAM, item, body, created_by="bob", may_read=bob_reads, now=NOW
                )
            )
        return str(refused.value)

    theirs, nothing = await bob_adds("b1", "alices"), await bob_adds("b2", "nowhere")
    assert theirs.replace("'alices'", "'nowhere'").replace("'b1'", "'b2'") == nothing
    assert "not 'bob''s to read" in theirs
    assert await store.tasks.read(lambda tx: backlog.get(tx, TEAM, "b1")) is None
    mine = await add(store, "alices-too", created_by="alice", depends_on=("alices",))
    assert mine.state == "waiting"
