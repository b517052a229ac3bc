"""A model's concurrency limit: a number of requests in flight, then a bounded queue, then 429.

A model server on a GPU (or two CPU cores) serves a few requests at once; sending it more only
makes every one slower. The gateway holds the excess in a first-come queue and refuses what
does not fit, so a caller hears "try again" at once instead of timing out later.

Used by :mod:`ankka.gateway.registry` (one per model) and the request path in
:mod:`ankka.gateway.app`. No task is created: waiters are futures resolved on release.
"""

from __future__ import annotations

import asyncio
from collections import deque

from ankka._kernel.errors import Refused

__all__ = ["ConcurrencyLimit", "QueueFull"]


class QueueFull(Refused):
    """No slot and no room to wait: refused on purpose; the caller retries later."""

    kind = "queue_full"
    status = 429

    def __init__(self, limit: int, queue: int) -> None:
        super().__init__(
            f"{limit} request(s) in flight and {queue} waiting", by="the concurrency limit"
        )
        self.limit = limit
        self.queue = queue


class ConcurrencyLimit:
    """At most ``limit`` holders; at most ``queue`` waiters; ``limit=None`` means no limit."""

    def __init__(self, limit: int | None, queue: int) -> None:
        self.limit = limit
        self.queue = queue
        self.in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def acquire(self) -> None:
        """Take a slot, waiting in line for one; raises :class:`QueueFull` when the line is full."""
        if self.limit is None or (self.in_flight < self.limit and not self._waiters):
            self.in_flight += 1
            return
        if len(self._waiters) >= self.queue:
            raise QueueFull(self.limit, self.queue)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # release() hands its slot over: in_flight is already counted
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot arrived as we were cancelled: pass it on
            else:
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot moves to the waiter; in_flight unchanged
                return
        self.in_flight -= 1
