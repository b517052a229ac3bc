"""Migrations run once, safely, when several runtimes open a fresh PostgreSQL store at the same
moment (an Agent's replicas on PostgreSQL, its pods started together).

Each opener has its own pool and connections to a real PostgreSQL, as a pod would. Two
sessions racing ``CREATE TABLE IF NOT EXISTS`` make one fail (``pg_type_typname_nsp_index``:
PostgreSQL checks the catalog's unique index, not the IF NOT EXISTS, when both insert), which
before this test's fix failed about one start in two here. With ``PGOPTIONS`` naming a schema
that does not exist yet (what the operator renders: one schema per Agent), the first opener
creates it, once, and every table lands there.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from ankka.runtime.store.open import Store

pytestmark = pytest.mark.integration

OPENERS = 24  # stores, each its own pool (as many pods)
ROUNDS = 4  # a fresh database each


def fresh_database(postgres_server: str) -> str:
    database = f"mig_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    return postgres_server.rsplit("/", 1)[0] + f"/{database}"


@pytest.fixture
def schema_of_the_agent() -> Iterator[str]:
    """PGOPTIONS as the operator renders it on an Agent's runtime (libpq reads it)."""
    schema = "ankka_shop_cart"
    before = os.environ.get("PGOPTIONS")
    os.environ["PGOPTIONS"] = f"-c search_path={schema}"
    yield schema
    if before is None:
        del os.environ["PGOPTIONS"]
    else:
        os.environ["PGOPTIONS"] = before


async def open_together(store: str) -> list[BaseException]:
    opened = await asyncio.gather(
        *(Store.open(store) for _ in range(OPENERS)), return_exceptions=True
    )
    failures: list[BaseException] = []
    for one in opened:
        if isinstance(one, BaseException):
            failures.append(one)
        else:
            await one.close()
    return failures


async def test_stores_opened_together_on_a_fresh_database_all_open(postgres_server: str) -> None:
    for _ in range(ROUNDS):
        failures = await open_together(fresh_database(postgres_server))
        assert failures == [], failures[0]


async def test_the_first_opener_creates_the_agents_schema_and_every_table_is_in_it(
    postgres_server: str, schema_of_the_agent: str
) -> None:
    store = fresh_database(postgres_server)
    assert await open_together(store) == []
    with psycopg.connect(store, options="-c search_path=public") as conn:
        rows = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_name LIKE 'ankka_%'"
        ).fetchall()
    assert {schema for schema, _ in rows} == {schema_of_the_agent}
    assert {"ankka_events", "ankka_tasks", "ankka_instances"} <= {name for _, name in rows}
