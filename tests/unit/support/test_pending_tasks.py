"""The suite's guard against unowned tasks fails a test that leaves one, and only that test."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

LEAKY = """
import asyncio


async def test_leaves_a_task() -> None:
    asyncio.create_task(asyncio.sleep(60), name="forgotten")


async def test_awaits_its_task() -> None:
    await asyncio.create_task(asyncio.sleep(0))


def test_sync() -> None:
    assert True
"""


def test_a_test_leaving_a_task_pending_fails_naming_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_leaky=LEAKY)
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    result = pytester.runpytest("-p", "tests.support.pending_tasks")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*the test left 1 asyncio task(s) pending: forgotten*"])
