"""What the recoveries at start share: a session's turn lock waited for within a bound, and
a failure named for a log line.

The approval desk and the server questions' desk recover before the runtime serves. A session
whose turn lock a turn holds (in flight in another runtime, through PostgreSQL's advisory
lock, or stuck there) must not hold the start up: its lock is waited for :data:`LOCK_WAIT`
seconds at most, and the session left to the turn that holds it. One row or session that
cannot be recovered (its journal unreadable, the store refusing one write) must not stop the
others nor the start: each desk handles it alone and logs it with :func:`cause`, which names
the failure by its kind only (an error's message may quote what a row holds).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from ankka._kernel.errors import AnkkaError
from ankka.runtime.engine.sessions import SessionQueue

__all__ = ["LOCK_WAIT", "cause", "turn_within"]

LOCK_WAIT = 2.0
"""At start, how long one session's turn lock is waited for (seconds)."""


@contextlib.asynccontextmanager
async def turn_within(
    queue: SessionQueue, session: str, seconds: float | None = LOCK_WAIT
) -> AsyncIterator[bool]:
    """Hold ``session``'s turn lock if it comes within ``seconds`` (None: however long it
    takes): yields True holding it (released as the block leaves), or False, not holding it,
    when a turn held it all that time. Only the wait is bounded: the block itself runs as
    long as it needs."""
    async with contextlib.AsyncExitStack() as stack:
        try:
            async with asyncio.timeout(seconds):
                await stack.enter_async_context(queue.turn(session))
        except TimeoutError:
            held = False
        else:
            held = True
        yield held


def cause(exc: BaseException) -> str:
    """A failure as a log line may name it: an ankka error's kind, else its type's name."""
    return exc.kind if isinstance(exc, AnkkaError) else type(exc).__name__
