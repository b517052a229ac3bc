"""What an A2A task in progress in this process says as it goes: its events, kept in order,
for every stream that follows it (the one that started it, and any that subscribe later).

A :class:`Live` is made when a request agent's turn starts and dropped once it has ended and
its followers have read the last event; a task of an autonomous agent is followed from its
durable record instead (:mod:`.tasks`), so it needs none.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ankka.runtime.serve.a2a.wire import TaskView

__all__ = ["Event", "Live"]

Event = object  # a wire event: Task, TaskStatusUpdateEvent or TaskArtifactUpdateEvent


@dataclass(slots=True)
class Live:
    """The events of one task so far, and whether it has ended."""

    view: TaskView
    events: list[Event] = field(default_factory=list)
    ended: bool = False
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def add(self, event: Event, *, view: TaskView | None = None, end: bool = False) -> None:
        async with self._changed:
            self.events.append(event)
            if view is not None:
                self.view = view
            self.ended = self.ended or end
            self._changed.notify_all()

    async def finish(self, view: TaskView) -> None:
        async with self._changed:
            self.view = view
            self.ended = True
            self._changed.notify_all()

    async def follow(self, start: int = 0) -> AsyncIterator[Event]:
        """Every event from ``start`` on, waiting for the next until the task ends."""
        at = start

        def ready() -> bool:
            return at < len(self.events) or self.ended

        while True:
            async with self._changed:
                await self._changed.wait_for(ready)
                batch = self.events[at:]
                ended = self.ended
            for event in batch:
                yield event
            at += len(batch)
            if ended and at >= len(self.events):
                return
