"""The one way a test waits for something to become true: poll with a deadline, then fail
naming what was awaited and the last value seen.

Why this exists: tests of real processes must wait (a server to listen, a task to end, a pod to
be ready), and a hand-written ``while time.monotonic() < end`` loop in every file drifts (some
never fail, some sleep a fixed time and then assert nothing happened). Every poll in the suite
goes through :func:`eventually` (synchronous checks) or :func:`eventually_async` (a coroutine
check, awaited on the test's loop).

A check returns something truthy when the wait is over; that value is returned. It may also
raise ``AssertionError`` while it is not yet true: the last such error is shown when the
deadline passes, so ``eventually(lambda: assert_rows(...))`` reads as the assertion it waits for.
Any other exception ends the wait at once (a process that died is not worth waiting for).
``detail``, when given, is asked once at the deadline for what else the failure should show (a
log's tail, what kubectl says about the pods).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Literal, NoReturn, TypeVar

import pytest

__all__ = ["eventually", "eventually_async"]

T = TypeVar("T")
# What a check answers before the wait is over: its type is not the value returned.
NotYet = Literal[False] | None


Detail = Callable[[], str] | None


def _give_up(
    what: str, timeout: float, last: object, error: AssertionError | None, detail: Detail
) -> NoReturn:
    seen = f"; last check failed: {error}" if error is not None else f"; last value: {last!r}"
    more = f"\n{detail()}" if detail is not None else ""
    pytest.fail(f"gave up after {timeout:g} s waiting for {what}{seen}{more}", pytrace=False)


def eventually(
    check: Callable[[], T | NotYet],
    *,
    what: str,
    timeout: float = 30.0,
    interval: float = 0.05,
    detail: Detail = None,
) -> T:
    """Call ``check`` until it returns something truthy and return that; fail at the deadline."""
    deadline = time.monotonic() + timeout
    last: object = None
    error: AssertionError | None = None
    while True:
        try:
            value = check()
        except AssertionError as exc:
            error, last = exc, None
        else:
            if value:
                return value
            error, last = None, value
        if time.monotonic() >= deadline:
            _give_up(what, timeout, last, error, detail)
        time.sleep(interval)


async def eventually_async(
    check: Callable[[], Awaitable[T | NotYet]],
    *,
    what: str,
    timeout: float = 30.0,  # noqa: ASYNC109 - a poll's deadline, not a cancellation scope
    interval: float = 0.05,
    detail: Detail = None,
) -> T:
    """:func:`eventually` for a coroutine check, sleeping on the event loop between tries."""
    deadline = time.monotonic() + timeout
    last: object = None
    error: AssertionError | None = None
    while True:
        try:
            value = await check()
        except AssertionError as exc:
            error, last = exc, None
        else:
            if value:
                return value
            error, last = None, value
        if time.monotonic() >= deadline:
            _give_up(what, timeout, last, error, detail)
        await asyncio.sleep(interval)
