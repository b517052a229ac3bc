"""A remote child's own events, relayed into its parent's notification stream.

:class:`~ankka.runtime.drivers.tasks.remote.RemoteChildren` follows a child another runtime
works over that runtime's task API (``GET /v1/tasks/{child}?wait=``) to settle its end; that
says nothing of what happens meanwhile. Beside it, for as long as the child is followed,
:func:`relay_events` reads the child's own stream at the peer
(``GET {peer}/v1/tasks/{child}/notifications``, server-sent events) and hands each of the
child's events (its iterations, its state changes) to the local notifier
(:meth:`~ankka.runtime.drivers.tasks.notify.Notifier.relay`), so the parent's and every
ancestor's stream carry them as they carry a local child's, with ``remote`` (the peer's name)
and ``event_id``: ``{child}/{event}/{digest}``, the digest of the event's own fields (not its
number or time, which are the peer process's), so the same event told again (the peer
restarted and resumed the iteration, or another process on the store follows the child
too) has the same id, and is told once per process (the notifier remembers the last ids).

Live, not durable, like every notification: nothing of it is written to the store. The
child's end is not relayed: it is told once, when it is settled (:mod:`.remote`), as today.
What the child does while no relay reads its stream (this runtime restarting, the peer away)
is not relayed afterwards: the peer's stream starts from when it is opened (its ``snapshot``
is not relayed), so a restart of either side repeats nothing. Bounded: an event line longer
than :data:`MAX_LINE` is skipped, a text field is cut to :data:`MAX_TEXT` characters, at most
``burst`` events at once and ``rate`` a second are relayed per child (those beyond are
dropped and counted in the next relayed event's ``skipped``). The relay never waits on
anything the parent's work waits on: it is its own task (run by :func:`guarded`: a relay
that fails is one warning, and the child's end is not held for it), and handing an event to
the notifier never blocks.

A child of a remote A2A agent is relayed by the same core (:func:`relay_stream`, the loop
that reads again, and :func:`hand_on`: the bound, the ids, the end), its A2A task's updates
said as a notification's fields first (:mod:`.remote_a2a_events`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from ankka._kernel.errors import StoreError
from ankka.runtime.drivers.tasks.notify import APPROVAL_EVENTS, EVENTS, Notifier

__all__ = [
    "MAX_LINE",
    "MAX_TEXT",
    "STREAM_SECONDS",
    "Limit",
    "Read",
    "guarded",
    "hand_on",
    "pause_after",
    "relay_events",
    "relay_stream",
    "relayed_event",
]

log = logging.getLogger("ankka.runtime.tasks")

MAX_LINE = 64 * 1024
MAX_TEXT = 500
STREAM_SECONDS = 300  # each stream's ?wait= (opened again while the child is followed)
_ENDS = frozenset({"task_completed", "task_failed", "task_cancelled"})
_NOT_RELAYED = _ENDS | APPROVAL_EVENTS
_PEERS_OWN = frozenset({"number", "event", "agent", "instance", "task", "at"})

Open = Callable[[str], Awaitable[httpx.Response]]
"""Opens the peer's stream of a child (its response not read yet)."""
Read = Callable[[], AsyncGenerator[dict[str, Any] | None, None]]
"""One reading of a child's events, each as a notification's fields (None: the reading is
live, nothing to relay); :func:`relay_stream` reads again when it ends."""


@dataclass
class Limit:
    """A token bucket: ``burst`` events at once, ``rate`` a second after that."""

    rate: float = 20.0
    burst: float = 100.0
    clock: Callable[[], float] = field(default=lambda: asyncio.get_running_loop().time())
    _tokens: float | None = None
    _at: float = 0.0
    skipped: int = 0

    def take(self) -> bool:
        now = self.clock()
        if self._tokens is None:
            self._tokens, self._at = self.burst, now
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens < 1:
            self.skipped += 1
            return False
        self._tokens -= 1
        return True


def relayed_event(
    child: str, told: dict[str, Any]
) -> tuple[str, str, str | None, dict[str, Any]] | None:
    """What the parent's stream is told of one of the child's events (``told``, as the peer
    sent it): its event, agent, instance and fields with ``event_id``; None for what is not
    relayed (another task's event, the child's end, an approval, an event unknown here)."""
    event = told.get("event")
    if told.get("task") != child or event not in EVENTS or event in _NOT_RELAYED:
        return None
    own = {
        str(k): (v[:MAX_TEXT] + "…" if isinstance(v, str) and len(v) > MAX_TEXT else v)
        for k, v in told.items()
        if k not in _PEERS_OWN and k not in ("remote", "event_id", "skipped")
    }
    canonical = json.dumps([event, own], sort_keys=True, ensure_ascii=False, default=str)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    instance = told.get("instance")
    return (
        str(event),
        str(told.get("agent") or ""),
        instance if isinstance(instance, str) else None,
        {**own, "event_id": f"{child}/{event}/{digest}"},
    )


async def _lines(answer: httpx.Response) -> AsyncIterator[str]:
    """The stream's lines; one longer than :data:`MAX_LINE` is skipped whole."""
    held, skipping = b"", False
    async for chunk in answer.aiter_bytes():
        held += chunk
        while True:
            end = held.find(b"\n")
            if end < 0:
                break
            line, held = held[:end], held[end + 1 :]
            if skipping:
                skipping = False
                continue
            yield line.rstrip(b"\r").decode(errors="replace")
        if len(held) > MAX_LINE:
            held, skipping = b"", True


async def relay_events(
    notifier: Notifier,
    child: str,
    peer: str,
    open_stream: Open,
    *,
    limit: Limit | None = None,
    pause: Callable[[int], Awaitable[None]] | None = None,
    ended: asyncio.Event | None = None,
) -> None:
    """Relay ``child``'s events from ``peer`` (see the module) until the peer's stream tells
    the child's end (then ``ended`` is set: every event before it was relayed), or until
    cancelled (the child no longer followed). A stream that breaks or is refused is opened
    again."""

    async def told() -> AsyncGenerator[dict[str, Any] | None, None]:
        answer = await open_stream(child)
        try:
            if answer.status_code != 200:
                raise _Refused(f"the peer answered {answer.status_code}")
            async for line in _lines(answer):
                if line.startswith("event:") and line[6:].strip() != "snapshot":
                    yield None  # live: it tells events (its snapshot alone does not say so)
                elif line.startswith("data:") and (data := _parsed(line[5:])) is not None:
                    yield data
        finally:
            await answer.aclose()

    # StoreError: the child's trace context, read for each opening (remote.py), unread for now.
    again = (httpx.HTTPError, _Refused, OSError, StoreError)
    await relay_stream(notifier, child, peer, told, again=again, limit=limit, pause=pause)
    if ended is not None:
        ended.set()


async def relay_stream(
    notifier: Notifier,
    child: str,
    peer: str,
    read: Read,
    *,
    again: tuple[type[Exception], ...],
    limit: Limit | None = None,
    pause: Callable[[int], Awaitable[None]] | None = None,
) -> None:
    """Every relay's loop: hand on what each ``read()`` tells (:func:`hand_on`) until it tells
    the child's end, reading again, ever later, after one that ends or raises one of
    ``again`` (the peer away, the stream broken) before it; until a read says it is live (a
    None), one that ends at once (the child final there, its end not settled here yet) counts
    as a failure too. Anything else it raises ends the relay (:func:`guarded`)."""
    limit = limit or Limit()
    failures = 0
    while True:
        failures += 1
        try:
            async with contextlib.aclosing(read()) as told:
                async for item in told:
                    if item is None:
                        failures = 0
                    elif hand_on(notifier, child, peer, item, limit):
                        return
        except again as exc:
            if failures in (1, 10) or failures % 100 == 0:
                # A third party's error by its type only: its text may hold a header's value.
                what = str(exc) if isinstance(exc, _Refused) else type(exc).__name__
                log.info("the events of remote child %s at %s: %s (again)", child, peer, what)
        await (pause or pause_after)(failures)


def _parsed(data: str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(data)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def hand_on(notifier: Notifier, child: str, peer: str, told: dict[str, Any], limit: Limit) -> bool:
    """Hand one of the child's events (``told``, a notification's fields, as its runtime's
    stream says it or as :mod:`.remote_a2a_events` maps an A2A update to them) on to the
    notifier, within ``limit``; whether it was the child's end (not relayed: see the module)."""
    if "event" not in told and isinstance(told.get("count"), int):
        limit.skipped += told["count"]  # the peer's ``dropped``: lost before they were sent
        return False
    if told.get("task") == child and told.get("event") in _ENDS:
        return True
    relayed = relayed_event(child, told)
    if relayed is None:
        return False
    event, agent, instance, fields = relayed
    if not limit.take():
        return False
    if limit.skipped:
        fields["skipped"], limit.skipped = limit.skipped, 0
    notifier.relay(event, agent=agent, instance=instance, task=child, remote=peer, **fields)
    return False


async def guarded(
    relaying: Awaitable[object], *, child: str, peer: str, done: asyncio.Event
) -> None:
    """Run a relay (``relaying``) so that its failure is one warning naming the child and its
    peer, never a task's unretrieved exception, and ``done`` is set however it ends: the
    child's end waits for the relay (:data:`~.remote.DRAIN_SECONDS` at most) only while the
    relay may still tell something. Only the exception's type is logged: its text may hold
    what a request carried (a header's value)."""
    try:
        await relaying
    except Exception as exc:  # the relay is the parent's progress, never its result
        log.warning(
            "relaying the events of remote child %s at %s stopped (%s); its end is still told",
            child, peer, type(exc).__name__,
        )  # fmt: skip
    finally:
        done.set()


async def pause_after(failures: int) -> None:
    """The wait before a relay looks again, ever longer (5 s at most)."""
    await asyncio.sleep(min(5.0, 0.2 * 2 ** min(failures, 5)))


class _Refused(Exception):
    """The peer did not open the child's stream (not yet made there, away, not permitted)."""
