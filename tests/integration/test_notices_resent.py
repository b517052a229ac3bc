"""Notices between processes on PostgreSQL when a send fails: the batch goes out again, so
another process's listener still hears it (issue 29: a notice whose send failed was lost to
every other process, which learned of it only from its polling)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from ankka.runtime.store.open import Store
from ankka.runtime.store.postgres_notices import LISTENER_NAME
from tests.support.eventually import eventually_async
from tests.support.postgres import fresh_database

pytestmark = pytest.mark.integration


def _cut_pooled_connections(url: str) -> int:
    """Terminate every backend on the database but the listeners' and this one: the sender's
    pooled connections, which its pool hands out without checking them first."""
    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND application_name <> %s",
            (LISTENER_NAME,),
        ).fetchall()
    return len(rows)


async def test_a_notice_whose_send_fails_is_sent_again_and_heard_by_another_process(
    postgres_server: str,
) -> None:
    url = fresh_database(postgres_server, "resent")
    async with await Store.open(url) as sender, await Store.open(url) as other:
        heard: list[str] = []
        resyncs: list[None] = []
        relay, notices = other.database.notices(), sender.database.notices()
        assert relay is not None and notices is not None  # PostgreSQL has a relay
        stop = relay.listen(heard.append, lambda: resyncs.append(None))
        try:
            await eventually_async(lambda: _listening(url), what="the other's LISTEN holds")
            notices.send("before")  # heard, and the sender's pool has a connection to cut
            await eventually_async(lambda: _ready(heard, "before"), what="the first notice")
            assert await asyncio.to_thread(_cut_pooled_connections, url) >= 1
            notices.send("after the cut")
            await eventually_async(
                lambda: _ready(heard, "after the cut"), what="the notice sent again"
            )
        finally:
            stop()
    assert heard == ["before", "after the cut"]
    assert resyncs == []  # the listener's own connection never broke: nothing to re-read


async def _listening(url: str) -> bool:
    def listening() -> bool:
        with psycopg.connect(url, autocommit=True) as admin:
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = %s AND query LIKE 'LISTEN%%'",
                (LISTENER_NAME,),
            ).fetchone()
        return bool(row and row[0])

    return await asyncio.to_thread(listening)


async def _ready(heard: list[str], payload: str) -> bool:
    return payload in heard
