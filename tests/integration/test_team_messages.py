"""Team messages on a real store, SQLite and PostgreSQL: the channel's own transactions, as
the team host runs them. A message sent again under its id is found, not sent twice, and a
different one under it refused (409); a kind or a text out of bounds is refused naming the
bound; an agent is told the messages sent to it (by name, or to everyone by another) until
told, and only those its task's creator may read; a listing pages through each once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest

from ankka._kernel.errors import RequestError
from ankka.runtime.records.tasks import Conflict
from ankka.runtime.store import team_message_statements as channel
from ankka.runtime.store.open import Store
from ankka.runtime.store.tasks import create_tables
from ankka.runtime.store.team_message_statements import MAX_TEXT, Message, MessageBody
from tests.support.stores import store_url

pytestmark = pytest.mark.integration

TEAM = "crew"
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with await Store.open(store_url(request, tmp_path, "msgs")) as opened:
        await create_tables(opened.tasks, channel.SCHEMA)
        yield opened


async def send(
    store: Store,
    message: str,
    body: MessageBody,
    *,
    created_by: str = "local",
    at: int = 0,
    team: str = TEAM,
) -> tuple[Message, bool]:
    now = NOW + timedelta(seconds=at)
    sent: tuple[Message, bool] = await store.tasks.write(
        lambda tx: channel.put(tx, team, message, body, created_by=created_by, now=now)
    )
    return sent


def said(sender: str, to: str, text: str, kind: str = "note") -> MessageBody:
    return MessageBody(sender, f"{sender}-task", to, kind, text)


async def unread(store: Store, agent: str, creator: str | None = None) -> list[str]:
    found = await store.tasks.read(
        lambda tx: channel.unread(tx, (TEAM,), agent, creator=creator, limit=10)
    )
    return [m.id for m in found]


async def test_a_message_sent_again_under_its_id_is_found_and_a_different_one_refused(
    store: Store,
) -> None:
    first, created = await send(store, "m1", said("lead", "writer", "Draft it."))
    assert created and first.seq == 1 and first.body.text == "Draft it."
    again, created = await send(store, "m1", said("lead", "writer", "Draft it."), at=5)
    assert not created and again == first  # nothing sent twice
    with pytest.raises(Conflict, match="'m1' of team 'crew' was already sent with a different"):
        await send(store, "m1", said("lead", "writer", "Draft something else."))
    listed = await store.tasks.read(
        lambda tx: channel.page(tx, TEAM, after=0, limit=10, creator=None)
    )
    assert [(m.id, m.body.text) for m in listed] == [("m1", "Draft it.")]


async def test_a_kind_or_text_out_of_bounds_is_refused_naming_the_bound(store: Store) -> None:
    with pytest.raises(RequestError, match="the kinds are note, question, answer, blocker"):
        await send(store, "k", said("lead", "writer", "Hi.", kind="gossip"))
    with pytest.raises(RequestError, match=f"at most {MAX_TEXT} characters.*has {MAX_TEXT + 1}"):
        await send(store, "t", said("lead", "writer", "x" * (MAX_TEXT + 1)))
    with pytest.raises(RequestError, match="empty"):
        await send(store, "e", said("lead", "writer", "   "))
    await send(store, "fits", said("lead", "writer", "x" * MAX_TEXT))  # the bound itself fits
    listed = await store.tasks.read(
        lambda tx: channel.page(tx, TEAM, after=0, limit=10, creator=None)
    )
    assert [m.id for m in listed] == ["fits"]


async def test_an_agent_is_told_what_was_sent_to_it_or_to_everyone_by_another_until_told(
    store: Store,
) -> None:
    await send(store, "to-writer", said("lead", "writer", "Draft it.", "question"), at=1)
    await send(store, "from-writer", said("writer", "everyone", "I am on it."), at=2)
    await send(store, "to-all", said("lead", "everyone", "Standup at 9."), at=3)
    await send(store, "to-researcher", said("lead", "researcher", "Look it up."), at=4)
    http = MessageBody("writer", None, "everyone", "note", "A caller named like an agent.")
    await send(store, "by-caller", http, at=5)
    await send(store, "other-team", said("lead", "writer", "Elsewhere."), team="other", at=6)
    assert await unread(store, "writer") == ["to-writer", "to-all", "by-caller"]
    researchers = ["from-writer", "to-all", "to-researcher", "by-caller"]
    assert await unread(store, "researcher") == researchers
    told = await store.tasks.read(
        lambda tx: channel.unread(tx, (TEAM,), "writer", creator=None, limit=2)
    )
    assert [m.id for m in told] == ["to-writer", "to-all"]  # at most the limit: the rest later
    await store.tasks.write(lambda tx: channel.told(tx, "writer", "w-task", told, NOW))
    assert await unread(store, "writer") == ["by-caller"]
    await store.tasks.write(lambda tx: channel.told(tx, "writer", "w-task-2", told, NOW))
    assert await unread(store, "writer") == ["by-caller"]  # told again: nothing changes
    assert "to-all" in await unread(store, "researcher")  # told to each agent on its own


async def test_a_task_hears_only_the_messages_sent_for_a_creator_it_may_read(
    store: Store,
) -> None:
    await send(store, "alices", said("lead", "writer", "Alice's plan."), created_by="alice")
    await send(store, "bobs", said("lead", "writer", "Bob's plan."), created_by="bob", at=1)
    assert await unread(store, "writer", creator="bob") == ["bobs"]
    assert await unread(store, "writer", creator=None) == ["alices", "bobs"]
    bobs = await store.tasks.read(
        lambda tx: channel.page(tx, TEAM, after=0, limit=10, creator="bob")
    )
    assert [m.id for m in bobs] == ["bobs"]


async def test_pages_after_a_seq_yield_each_message_once_in_the_order_sent(store: Store) -> None:
    for k in range(5):
        await send(store, f"m{k}", said("lead", "everyone", f"Number {k}."), at=k)
    seen: list[str] = []
    after = 0
    while True:
        found = await store.tasks.read(
            partial(channel.page, team=TEAM, after=after, limit=2, creator=None)
        )
        if not found:
            break
        seen += [m.id for m in found]
        after = found[-1].seq
    assert seen == [f"m{k}" for k in range(5)]
