"""What wakes a team's event streams: its log grew, here or in another process.

The store is the truth (:mod:`ankka.runtime.store.team_event_statements`): a stream reads the
log after the last event it sent, and waits here between reads. The team host tells this
watch the log's last seq after each of its writes (:meth:`TeamWatch.moved`); when it grew,
the streams of this process waiting on that team wake at once, and those of every other
process on the store through its relay (PostgreSQL's LISTEN/NOTIFY). A wake is only a hint:
a notice lost on the way costs a stream a recheck's delay (it reads the store again after
``recheck`` seconds without one), never an event; after the relay's break every waiting
stream reads the store at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator

from ankka.runtime.store.database import NoticeRelay

__all__ = ["TeamWatch"]

_KEY = "team_log"  # a relayed payload of this watch's: {"team_log": team, "seq": n}


class TeamWatch:
    """Wakes the watchers of a team when :meth:`moved` (or another process) says it grew."""

    def __init__(self, relay: NoticeRelay | None) -> None:
        self._relay = relay
        self._heads: dict[str, int] = {}
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self._listening = False

    def moved(self, team: str, head: int) -> None:
        """``team``'s log stands at ``head`` after a write of this process's."""
        if head <= self._heads.get(team, 0):
            return
        self._heads[team] = head
        self._wake(team)
        if self._relay is not None:
            self._relay.send(json.dumps({_KEY: team, "seq": head}))

    def _wake(self, team: str) -> None:
        for waiter in self._waiting.get(team, ()):
            waiter.set()

    def _received(self, payload: str) -> None:
        try:
            sent = json.loads(payload)
        except ValueError:
            return
        if isinstance(sent, dict) and isinstance(sent.get(_KEY), str):
            self._wake(sent[_KEY])

    def _resynced(self) -> None:
        """The relay hears again after a break: what it missed meanwhile is in the store, so
        every waiting stream reads it now rather than at its next recheck."""
        for team in list(self._waiting):
            self._wake(team)

    @contextlib.contextmanager
    def watching(self, team: str) -> Iterator[asyncio.Event]:
        """An event set whenever ``team``'s log grows (here or elsewhere) while held: a
        stream clears it, reads the store, then waits on it, so a write between its read and
        its wait still wakes it."""
        if self._relay is not None and not self._listening:
            self._listening = True  # other processes' writes matter once someone here waits
            self._relay.listen(self._received, self._resynced)
        waiter = asyncio.Event()
        self._waiting.setdefault(team, set()).add(waiter)
        try:
            yield waiter
        finally:
            held = self._waiting.get(team)
            if held is not None:
                held.discard(waiter)
                if not held:
                    del self._waiting[team]
