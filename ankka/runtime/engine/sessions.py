"""One turn at a time per session; different sessions run concurrently.

A second request for a busy session waits its turn in arrival order (asyncio's lock wakes its
waiters first in, first out); it is never rejected. Across pods, a shared lock (the PostgreSQL
store's advisory lock) is taken once a request's local turn comes, and the journal's
``expected`` position guards every append.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from ankka.runtime.store.journal_store import SharedSessionLock

__all__ = ["SessionQueue"]


@dataclass
class _Slot:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    holders: int = 0  # running plus waiting


class SessionQueue:
    def __init__(self, shared: SharedSessionLock | None = None) -> None:
        self._slots: dict[str, _Slot] = {}
        self._shared = shared

    def pending(self, session: str) -> int:
        """Requests for ``session`` running or waiting right now."""
        slot = self._slots.get(session)
        return slot.holders if slot else 0

    @asynccontextmanager
    async def turn(self, session: str) -> AsyncIterator[None]:
        slot = self._slots.get(session)
        if slot is None:
            slot = self._slots[session] = _Slot()
        slot.holders += 1
        try:
            async with slot.lock:
                if self._shared is None:
                    yield
                else:
                    async with self._shared.hold(session):
                        yield
        finally:
            slot.holders -= 1
            if slot.holders == 0:
                del self._slots[session]
