"""Injected time, so code that measures or stamps never reads the wall clock directly.

One type for the runtime (turn latency), the gateway (probe schedule, request latency) and the
operator (condition times, certificate issuance, its periodic loop): :class:`Clock`.
:class:`SystemClock` is the real one; :class:`ManualClock` is moved by hand in tests.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware (UTC)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back; for measuring durations."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.perf_counter()


class ManualClock:
    """A clock that moves only when told to: ``advance(seconds)`` moves both readings."""

    def __init__(self, start: datetime, *, monotonic: float = 0.0) -> None:
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime (UTC); got a naive one")
        self._now = start
        self._monotonic = monotonic

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock never goes back")
        self._now += timedelta(seconds=seconds)
        self._monotonic += seconds
