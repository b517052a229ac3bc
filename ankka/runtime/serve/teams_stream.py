"""Watching a team: its summary to poll, and its events, live (docs/http-api.md, "Teams").

- ``GET /v1/teams/{team}/summary``: the backlog by aggregate (counts by state, the budget's
  limit, use and reservation, the oldest claim held, the log's last event id);
- ``GET /v1/teams/{team}/events``: server-sent events from the team's log in the store
  (:mod:`ankka.runtime.store.team_event_statements`): its items' changes and its channel's
  messages, each with its id in the log. A stream that names no event to resume after starts
  with a ``snapshot`` (the summary, its id the last event before it); ``Last-Event-ID`` (or
  ``?after=N``, the header winning, as a browser's EventSource resends it) resumes after that
  event with nothing lost or sent twice, from the store, whichever process wrote it.

Bounded: at most :data:`MAX_STREAMS` streams open on a runtime and
:data:`MAX_STREAMS_PER_CALLER` per caller (429 past either), each for ``?wait=S`` seconds or
at most :data:`MAX_STREAM_SECONDS` (then it ends; the client resumes with its last id); a
comment every :data:`KEEP_ALIVE` seconds with nothing to send. A caller sees what it may read
of the team, as on the other team routes (:meth:`TeamHost.reads_all`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import FastAPI, Header, Query
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response

from ankka._kernel.errors import RequestError, StoreError
from ankka._kernel.shares import CallerShares
from ankka.runtime.drivers.teams.backlog import TeamHost
from ankka.runtime.serve.api import EventStream, error_json, errors, events
from ankka.runtime.serve.identity import caller_of
from ankka.runtime.serve.tasks_http import KEEP_ALIVE, RECHECK, Wait, sse
from ankka.runtime.serve.teams_http import TeamName
from ankka.runtime.serve.teams_wire import TeamSummary
from ankka.runtime.store.team_event_statements import (
    ITEM_EVENTS,
    MESSAGE_EVENT,
    Summary,
    TeamEvent,
)

__all__ = [
    "MAX_STREAMS",
    "MAX_STREAMS_PER_CALLER",
    "MAX_STREAM_SECONDS",
    "StreamSlots",
    "add_team_watch_routes",
    "event_json",
]

MAX_STREAMS = 64  # team streams open at once on one runtime
MAX_STREAMS_PER_CALLER = 4
MAX_STREAM_SECONDS = 900.0  # a stream with no ?wait= ends after this; the client resumes
_BATCH = 200  # events read from the store at a time
MAX_EVENT_ID = 2**62  # (a BIGINT's range, with room)
_ANY = (401, 403, 413, 422, 503)
STREAM_EVENTS = ("snapshot", *ITEM_EVENTS, MESSAGE_EVENT, "error")
After = Annotated[
    int | None,
    Query(
        ge=0,
        le=MAX_EVENT_ID,
        description="resume after this event id (0: the whole log); Last-Event-ID wins",
    ),
]
LastEventId = Annotated[
    str | None,
    Header(
        alias="last-event-id",
        max_length=20,
        description="the id of the last event received: the stream resumes after it",
    ),
]


class TooManyStreams(RequestError):
    kind = "too_many_streams"
    status = 429
    retry_after = 5


class StreamSlots:
    """The streams open: at most ``total`` on the runtime, ``share`` per caller."""

    def __init__(self, *, total: int = MAX_STREAMS, share: int = MAX_STREAMS_PER_CALLER) -> None:
        self.total = total
        self.open = 0
        self._shares = CallerShares(share)

    def take(self, caller: str) -> Callable[[], None]:
        """One slot for ``caller`` (TooManyStreams past a bound); the function gives it back
        (once, however often it is called)."""
        if self.open >= self.total:
            raise TooManyStreams(
                f"this runtime serves {self.total} team event streams at once, its most; "
                "close one, or try again shortly"
            )
        if not self._shares.take(caller):
            raise TooManyStreams(
                f"caller {caller!r} has {self._shares.share} team event streams open, its "
                "most; close one before opening another"
            )
        self.open += 1
        given = False

        def give_back() -> None:
            nonlocal given
            if not given:
                given = True
                self.open -= 1
                self._shares.give_back(caller)

        return give_back


def event_json(event: TeamEvent) -> dict[str, Any]:
    """A log event as a stream sends it: an item's change with the item's id and what
    changed, or a message whole under ``message``."""
    head = {"id": event.seq, "team": event.team, "at": event.at.isoformat()}
    if event.event == MESSAGE_EVENT:
        return {**head, "message": event.data}
    return {**head, "item": event.item, **event.data}


def summary_json(
    team: str, found: Summary, limits: tuple[int | None, int | None], now: datetime
) -> dict[str, Any]:
    """The summary as the route answers it; ``limits``: the team's iterations and tokens."""
    spent = found.spent
    iterations, tokens = limits
    oldest = None
    if found.oldest_claim is not None:
        item, claimed_at = found.oldest_claim
        age = max(0.0, (now - claimed_at).total_seconds())
        oldest = {"item": item, "claimed_at": claimed_at.isoformat(), "age_seconds": age}
    return {
        "team": team,
        "items": sum(found.counts.values()),
        "counts": dict(found.counts),
        "budget": {
            "iterations": {
                "limit": iterations,
                "used": spent.iterations_used,
                "reserved": spent.iterations_reserved,
            },
            "tokens": {
                "limit": tokens,
                "used": spent.tokens_used,
                "reserved": spent.tokens_reserved,
            },
        },
        "oldest_claim": oldest,
        "last_event": found.head,
        "at": now.isoformat(),
    }


def _resume_point(header: str | None, after: int | None) -> int | None:
    if header is None:
        return after
    # ASCII digits only: str.isdigit() also holds of '²', which int() refuses (a 500)
    if re.fullmatch(r"[0-9]+", header.strip()) is None or int(header.strip()) > MAX_EVENT_ID:
        raise RequestError(
            f"Last-Event-ID {header[:20]!r} is not an event id of this stream: send the id of "
            "the last event received unchanged (a number), or leave it out to start afresh"
        )
    return int(header.strip())


def add_team_watch_routes(app: FastAPI, host: TeamHost, slots: StreamSlots | None = None) -> None:
    slots = slots or StreamSlots()

    async def summary_of(team: str, caller: str) -> dict[str, Any]:
        found = await host.summary(team, by=caller)
        declared = host.team(team)
        return summary_json(team, found, (declared.iterations, declared.tokens), host.clock.now())

    @app.get(
        "/v1/teams/{team}/summary",
        operation_id="team_summary",
        summary="A team's backlog by aggregate: counts by state, budget, oldest claim",
        response_model=TeamSummary,
        responses=errors(404, *_ANY),
    )
    async def team_summary(team: TeamName, request: Request) -> Any:
        return await summary_of(team, caller_of(request.scope))

    @app.get(
        "/v1/teams/{team}/events",
        operation_id="team_events",
        summary="A team's events, live: its items' changes and its messages; resumable",
        response_class=EventStream,
        responses={
            200: events(
                "server-sent events: a snapshot (unless resuming), then the team's events",
                *STREAM_EVENTS,
            ),
            **errors(404, 429, *_ANY),
        },
    )
    async def team_events(
        team: TeamName,
        request: Request,
        wait: Wait = None,
        after: After = None,
        last_event_id: LastEventId = None,
    ) -> Response:
        caller = caller_of(request.scope)
        host.team(team)
        resume = _resume_point(last_event_id, after)
        give_back = slots.take(caller)
        first = None
        if resume is None:
            try:
                shown = await summary_of(team, caller)
            except BaseException:
                give_back()
                raise
            first, resume = sse("snapshot", shown, shown["last_event"]), shown["last_event"]
        seconds = min(wait, MAX_STREAM_SECONDS) if wait is not None else MAX_STREAM_SECONDS
        body = _follow(host, team, caller, resume, first, seconds, give_back)
        return EventStream(
            body, headers={"cache-control": "no-cache"}, background=BackgroundTask(give_back)
        )


async def _follow(
    host: TeamHost,
    team: str,
    caller: str,
    after: int,
    first: bytes | None,
    seconds: float,
    give_back: Callable[[], None],
) -> AsyncIterator[bytes]:
    """The stream: ``first``, then every event after ``after`` the caller may read, read
    from the store whenever the log grew (or every RECHECK seconds, a wake being a hint),
    for ``seconds``."""
    clock = host.clock
    until = clock.monotonic() + seconds
    quiet_since = clock.monotonic()
    try:
        if first is not None:
            yield first
        with host.watch.watching(team) as woken:
            while True:
                woken.clear()
                before = after
                try:
                    found, after = await host.events(team, by=caller, after=after, limit=_BATCH)
                except StoreError as exc:
                    yield sse("error", error_json(exc)[1])
                    return
                for event in found:
                    yield sse(event.event, event_json(event), event.seq)
                if found:
                    quiet_since = clock.monotonic()
                if after - before >= _BATCH:
                    continue  # a whole batch read: more may follow at once
                left = until - clock.monotonic()
                if left <= 0:  # (what was there is sent first: ?wait=0 reads the log and ends)
                    return
                if clock.monotonic() - quiet_since >= KEEP_ALIVE:
                    yield b": keep-alive\n\n"
                    quiet_since = clock.monotonic()
                await _woken(woken, min(left, RECHECK, KEEP_ALIVE))
    finally:
        give_back()


async def _woken(woken: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await woken.wait()
