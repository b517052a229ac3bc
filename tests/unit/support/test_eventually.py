"""``eventually``: the suite's one poll, returning the first truthy value or failing by name."""

from __future__ import annotations

import pytest

from tests.support.eventually import eventually, eventually_async


def test_returns_the_first_truthy_value() -> None:
    answers = iter([None, 0, "ready"])
    assert eventually(lambda: next(answers), what="the answer", interval=0) == "ready"


def test_fails_naming_what_was_awaited_and_the_last_value() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"waiting for the pod; last value: \[\]"):
        eventually(list, what="the pod", timeout=0.0, interval=0)


def test_a_failing_assertion_is_retried_then_reported() -> None:
    tries = iter([False, True])

    def check() -> bool:
        assert next(tries), "not yet: 0 rows"
        return True

    assert eventually(check, what="rows", interval=0) is True

    def never() -> bool:
        raise AssertionError("never")

    with pytest.raises(pytest.fail.Exception, match="last check failed: never"):
        eventually(never, what="rows", timeout=0.0, interval=0)


def test_the_detail_is_asked_once_at_the_deadline_and_shown() -> None:
    asked: list[str] = []

    def detail() -> str:
        asked.append("log")
        return "the server's log: listening on :0"

    with pytest.raises(pytest.fail.Exception, match=r"last value: None\nthe server's log: listen"):
        eventually(lambda: None, what="the server", timeout=0.0, interval=0, detail=detail)
    assert asked == ["log"]


def test_another_exception_ends_the_wait_at_once() -> None:
    tries: list[int] = []

    def died() -> bool:
        tries.append(1)
        raise RuntimeError("the server exited with 1")

    with pytest.raises(RuntimeError, match="exited with 1"):
        eventually(died, what="the server", interval=0)
    assert tries == [1]


async def test_the_async_form_awaits_its_check() -> None:
    answers = iter([None, 3])

    async def check() -> int | None:
        return next(answers)

    assert await eventually_async(check, what="a count", interval=0) == 3
