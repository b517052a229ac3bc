"""A pytest plugin: a test that leaves an asyncio task pending fails (as kopf's suite does).

Its autouse fixture notes the event loop's tasks before the test and, at teardown (in the
test's own loop, before pytest-asyncio closes it and would cancel whatever is left), fails the
test naming every task the test started and did not see finish. Registered for every tier by
``tests/conftest.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

__all__ = ["no_task_left_pending"]


@pytest.fixture(autouse=True)
async def no_task_left_pending() -> AsyncIterator[None]:
    before = asyncio.all_tasks()
    yield
    await asyncio.sleep(0)  # done-callbacks of tasks that just finished run first
    left = asyncio.all_tasks() - before - {asyncio.current_task()}
    if left:
        names = ", ".join(sorted(f"{t.get_name()} ({t.get_coro()!r})" for t in left))
        pytest.fail(f"the test left {len(left)} asyncio task(s) pending: {names}", pytrace=False)
