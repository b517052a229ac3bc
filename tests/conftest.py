"""Fixtures every tier shares: the private PostgreSQL cluster; no test leaves a task pending."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.postgres import postgres_cluster

pytest_plugins = ["tests.support.pending_tasks"]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The DSN of a PostgreSQL cluster started for this test session."""
    with postgres_cluster() as dsn:
        yield dsn
