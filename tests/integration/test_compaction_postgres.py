"""Compaction on PostgreSQL with two runtimes ("pods"): exactly one compacts a session."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import psycopg
import pytest

from ankka.runtime.compaction import Compaction
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.features.compaction.consumer import Job
from ankka.runtime.providers.base import ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.compaction import COMPACTED
from ankka.runtime.store.open import Store
from ankka.runtime.store.session_leases import StoreLeases
from tests.support.leases import check_the_session_lease_rule
from tests.support.runtimes import runtime_for

pytestmark = pytest.mark.integration

SETTINGS = Compaction(limit_chars=400, keep_messages=2)


async def database(dsn: str) -> str:
    name = f"compaction_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {name}")
    return dsn.rsplit("/", 1)[0] + f"/{name}"


class GatedSummariser:
    """Answers once its gate opens, so a test can hold a compaction in flight."""

    def __init__(self, text: str) -> None:
        self.inner = ScriptedProvider([text], name="default")
        self.gate = asyncio.Event()
        self.asked = asyncio.Event()

    name = "default"
    model = "scripted"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.asked.set()
        await self.gate.wait()
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        yield await self.complete(request)

    async def aclose(self) -> None:
        return None


def service() -> Service:
    svc = Service("pods")

    @svc.agent("chat")
    def chat(request: TurnRequest) -> Turn:
        return Turn(message=request.message, compaction=SETTINGS)

    return svc


async def pod(
    dsn: str, agent: ScriptedProvider, summariser: object, stores: list[Store]
) -> Runtime:
    """A runtime as ``ankka serve`` opens one: its compaction leases in its store."""
    store = await Store.open(dsn)
    stores.append(store)
    leases = store.leases
    assert isinstance(leases, StoreLeases)
    runtime = runtime_for(
        service(),
        store=store.journal_store,
        providers={"default": agent},
        compaction_providers={"default": summariser},
        compaction_leases=leases,
    )
    return await runtime.__aenter__()


async def test_two_pods_never_both_summarise_one_session(postgres_server: str) -> None:
    dsn = await database(postgres_server)
    first = GatedSummariser("they chatted")
    second = ScriptedProvider(["never asked"], name="default")
    stores: list[Store] = []
    a = await pod(dsn, ScriptedProvider(["a" * 50] * 4, name="default"), first, stores)
    b = await pod(dsn, ScriptedProvider([], name="default"), second, stores)
    try:
        for n in range(4):
            await a.run(a.plan("chat", "shared", f"question {chr(97 + n)} ".ljust(50, "q")))
        await asyncio.wait_for(first.asked.wait(), 30)  # pod a holds the lease now
        b.context.compactor.committed("shared", Job(SETTINGS, "default"))
        await asyncio.wait_for(b.context.compactor.idle(), 30)
        assert second.requests == []  # pod b found the session leased and left it
        first.gate.set()
        await asyncio.wait_for(a.context.compactor.idle(), 30)
        b.context.compactor.committed("shared", Job(SETTINGS, "default"))
        await asyncio.wait_for(b.context.compactor.idle(), 30)
        assert second.requests == []  # and once compacted, it is no longer due
        kinds = [e.kind for e in await a.context.journal.store.read("shared")]
        assert kinds.count(COMPACTED) == 1
    finally:
        await a.aclose()
        await b.aclose()
        for store in stores:
            await store.close()


async def test_a_lease_is_exclusive_until_it_expires(postgres_server: str) -> None:
    async with await Store.open(await database(postgres_server)) as store:
        await check_the_session_lease_rule(store.tasks)


OLD_LEASES = """CREATE TABLE ankka_compaction_leases (
    session TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires TIMESTAMPTZ NOT NULL
)"""  # as versions before ankka_session_leases created it


async def _tables(dsn: str) -> set[str]:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cursor = await conn.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'ankka_%'"
        )
        return {str(row[0]) for row in await cursor.fetchall()}


async def _open_as_serve(dsn: str) -> None:
    """Open the store as ``ankka serve`` does, take a compaction lease, close it."""
    async with await Store.open(dsn) as store:
        assert await store.leases.acquire("s1", "new-pod", timedelta(minutes=1))


async def test_a_new_store_has_no_old_compaction_leases_table(postgres_server: str) -> None:
    dsn = await database(postgres_server)
    await _open_as_serve(dsn)
    tables = await _tables(dsn)
    assert "ankka_session_leases" in tables and "ankka_events" in tables
    assert "ankka_compaction_leases" not in tables


async def test_an_old_stores_compaction_leases_are_left_as_they_were(postgres_server: str) -> None:
    dsn = await database(postgres_server)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(OLD_LEASES)
        await conn.execute(
            "INSERT INTO ankka_compaction_leases VALUES ('s1', 'old-pod', now() + interval '1 h')"
        )
    await _open_as_serve(dsn)  # the session's lease is taken in the new table, not the old
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cursor = await conn.execute("SELECT session, holder FROM ankka_compaction_leases")
        assert await cursor.fetchall() == [("s1", "old-pod")]
