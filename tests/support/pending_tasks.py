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

_SETTLE_TICKS = 5


@pytest.fixture(autouse=True)
async def no_task_left_pending() -> AsyncIterator[None]:
    before = asyncio.all_tasks()
    yield
    # A few loop ticks first (bounded): done-callbacks of tasks that just finished, and the
    # close task the event loop itself starts when an unfinished async generator is collected
    # (the openai SDK breaks out of its SSE iterator at [DONE]), finish by themselves. A task
    # still pending after that was left behind.
    left: set[asyncio.Task[object]] = set()
    for _ in range(_SETTLE_TICKS):
        await asyncio.sleep(0)
        left = asyncio.all_tasks() - before - {asyncio.current_task()}
        if not left:
            break
    if left:
        names = ", ".join(sorted(f"{t.get_name()} ({t.get_coro()!r})" for t in left))
        pytest.fail(f"the test left {len(left)} asyncio task(s) pending: {names}", pytrace=False)
