"""Injected time, so code that measures or stamps never reads the wall clock directly.

One type for the runtime (turn latency), the gateway (probe schedule, request latency) and the
operator (condition times, certificate issuance, its periodic loop): :class:`Clock`.
:class:`SystemClock` is the real one; :class:`ManualClock` is moved by hand in tests. A
:class:`SleepingClock` can also be waited on (the scripted provider's ``delay_ms``); both
clocks here can, and a :class:`ManualClock`'s waits end only when it is advanced past them.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SleepingClock", "SystemClock"]


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware (UTC)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back; for measuring durations."""
        ...


class SleepingClock(Clock, Protocol):
    """A clock that can also be waited on (so a test's clock decides when a wait ends)."""

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.perf_counter()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class ManualClock:
    """A clock that moves only when told to: ``advance(seconds)`` moves both readings and
    ends every :meth:`sleep` whose time has come."""

    def __init__(self, start: datetime, *, monotonic: float = 0.0) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime (UTC); got a naive one")
        self._now = start
        self._monotonic = monotonic
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    @property
    def sleeping(self) -> int:
        """How many waits have not ended yet."""
        return sum(1 for _, future in self._sleepers if not future.done())

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        future = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._monotonic + seconds, future))
        await future

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock never goes back")
        self._now += timedelta(seconds=seconds)
        self._monotonic += seconds
        due = [(at, f) for at, f in self._sleepers if at <= self._monotonic]
        self._sleepers = [(at, f) for at, f in self._sleepers if at > self._monotonic]
        for _, future in due:
            if not future.done():
                future.set_result(None)
