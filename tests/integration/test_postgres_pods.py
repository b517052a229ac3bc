"""Two ``ankka serve`` processes ("pods") on one PostgreSQL store share sessions safely."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Callable

import httpx
import psycopg
import pytest

from tests.integration.conftest import Script, received
from tests.support.processes import Server

pytestmark = pytest.mark.integration


async def test_one_session_served_by_two_pods_takes_one_turn_at_a_time(
    standin: Callable[[Script], Server],
    serve: Callable[..., Server],
    postgres_server: str,
) -> None:
    database = f"pods_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(postgres_server, autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {database}")
    store = postgres_server.rsplit("/", 1)[0] + f"/{database}"
    count = 20
    model = standin([{"text": f"reply {i}", "delay_ms": 20} for i in range(count)])
    pods = [serve(model.url, store=store), serve(model.url, store=store)]
    async with httpx.AsyncClient(timeout=60) as client:
        answers = await asyncio.gather(
            *(
                client.post(
                    f"{pods[i % 2].url}/v1/agents/polite/sessions/shared", json={"message": f"m{i}"}
                )
                for i in range(count)
            )
        )
        assert [a.status_code for a in answers] == [200] * count
        views = [
            (await client.get(f"{pod.url}/v1/sessions/shared/messages")).json()["messages"]
            for pod in pods
        ]
    assert len(views[0]) == 2 * count
    assert views[0] == views[1]
    sent = received(model)
    for earlier, later in itertools.pairwise(sent):
        assert earlier["answered"] < later["received"], "two pods ran turns of one session at once"
    for i, request in enumerate(sent):
        assert len(request["body"]["messages"]) == 2 * i + 1, "a turn missed an earlier turn"
