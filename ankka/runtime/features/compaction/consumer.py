"""The compaction consumer: summarises sessions after their turns are committed.

Never part of a request. After a turn is written, its writer calls :meth:`Compactor.committed`
(which only queues the session and returns); a bounded set of workers takes sessions from the
queue, one compaction at a time per session, many sessions in parallel. For each, a worker
brings its fold up to date, decides whether it is due (over its start, not pausing after a
rejection or a failure), cuts, takes the session's lease, calls the summariser outside any
lock, checks the summary, and journals ``HistoryCompacted`` or ``CompactionRejected`` under
the session's turn lock, only if no other compaction landed since the cut. A failed
summariser call is skipped, counted, and retried at a later commit after a growing pause; it
never holds a worker, so it never stalls other sessions.

Any session can be fed to it: a request agent's session, or an autonomous task's
``task:<id>`` session, whose writer calls :meth:`committed` the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from ankka._kernel import tracing
from ankka._kernel.clock import Clock
from ankka._kernel.errors import AnkkaError, ConfigurationError
from ankka._kernel.ids import new_id
from ankka.runtime.declare.compaction import Compaction
from ankka.runtime.engine.lru import DEFAULT_CACHE_BYTES, WeighedLRU
from ankka.runtime.engine.view import SentView
from ankka.runtime.features.compaction.cut import Cut, choose_cut
from ankka.runtime.features.compaction.decide import due, pause_until, verdict_record
from ankka.runtime.features.compaction.metrics import CompactionMetrics
from ankka.runtime.features.compaction.spans import compaction_ended, compaction_span
from ankka.runtime.features.compaction.summariser import summarise, summary_request
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.providers.config import find_model
from ankka.runtime.records.compaction import CompactionRecord, HistoryCompacted
from ankka.runtime.records.registry import Entry, Record
from ankka.runtime.store.session_leases import CompactionLeases, LocalLeases

if TYPE_CHECKING:
    from ankka.runtime.engine.spans import EngineSpans

__all__ = ["Compactor", "Job"]

log = logging.getLogger("ankka.runtime.compaction")


class EventLog(Protocol):
    """What the consumer needs of the :class:`~ankka.runtime.store.journal.Journal`: read a
    session's records after a position, append records."""

    async def read(self, session: str, *, after: int = 0) -> list[Entry]: ...

    async def append(self, session: str, records: Sequence[Record], *, expected: int) -> int: ...


class TurnLock(Protocol):
    """The session's turn lock (the runtime's queue): a record is written between turns."""

    def turn(self, session: str) -> AbstractAsyncContextManager[None]: ...


@dataclass(frozen=True, slots=True)
class Job:
    """How to compact a session: its settings and the configured model that summarises."""

    settings: Compaction
    model: str


@dataclass(frozen=True, slots=True)
class _Failure:
    count: int
    until: datetime


class Compactor:
    """The consumer. An async context manager that owns its workers."""

    def __init__(
        self,
        *,
        journal: EventLog,
        turns: TurnLock,
        providers: Mapping[str, ModelProvider],
        clock: Clock,
        metrics: CompactionMetrics,
        leases: CompactionLeases | None = None,
        workers: int = 4,
        lease_ttl: timedelta = timedelta(minutes=10),
        cache_sessions: int = 1024,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        spans: EngineSpans | None = None,
    ) -> None:
        """``spans``: when tracing is on, each compaction is an ``ankka.compaction`` span (its
        summariser's call a ``chat`` inside) under the context of the commit that queued it."""
        if workers < 1:
            raise ConfigurationError("a compactor needs at least one worker")
        self._journal = journal
        self._turns = turns
        self.providers = dict(providers)
        self._clock = clock
        self.metrics = metrics
        self._leases = leases or LocalLeases()
        self._workers = workers
        self._lease_ttl = lease_ttl
        self._holder = new_id("compactor")
        self._capacity = cache_sessions
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._pending: dict[str, Job] = {}
        self._running: set[str] = set()
        self._failures: dict[str, _Failure] = {}
        self._views: WeighedLRU[str, SentView] = WeighedLRU(
            _footprint, entries=cache_sessions, max_bytes=cache_bytes
        )
        self._wrote: OrderedDict[str, None] = OrderedDict()
        self._idle = asyncio.Event()
        self._idle.set()
        self._group: asyncio.TaskGroup | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._spans = spans
        self._carriers: dict[str, dict[str, str]] = {}  # per pending session, tracing on

    async def __aenter__(self) -> Compactor:
        self._group = asyncio.TaskGroup()
        await self._group.__aenter__()
        self._tasks = [
            self._group.create_task(self._work(), name=f"ankka-compactor-{n}")
            for n in range(self._workers)
        ]
        return self

    async def __aexit__(self, *exc: object) -> None:
        group, self._group = self._group, None
        try:
            if group is not None:
                for task in self._tasks:  # the workers wait on the queue for ever: stop them
                    task.cancel()
                await group.__aexit__(None, None, None)
        finally:
            await self._leases.close()

    def committed(self, session: str, job: Job) -> None:
        """A turn of ``session`` was committed: queue it. Returns at once."""
        queued = session in self._pending
        self._pending[session] = job
        if self._spans is not None:
            self._carriers[session] = tracing.carrier()
        if not queued and session not in self._running:
            self._idle.clear()
            self._queue.put_nowait(session)

    def wrote_since_asked(self, session: str) -> bool:
        """Whether this consumer appended to ``session`` (a summary or a rejection) since this
        was last asked: a writer that keeps its own fold (a task's) reads the session again
        only then, and learns of another process's append from its next commit's refusal."""
        return self._wrote.pop(session, False) is None

    async def idle(self) -> None:
        """Wait until nothing is queued or running (tests and benchmarks)."""
        await self._idle.wait()

    async def _work(self) -> None:
        while True:
            session = await self._queue.get()
            job = self._pending.pop(session)
            carrier = self._carriers.pop(session, {})
            self._running.add(session)
            try:
                if self._spans is None:
                    again = await self._compact(session, job)
                else:
                    with self._spans.under(carrier):
                        again = await self._compact(session, job)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a summariser or store failure: skip, pause, go on
                self._failed(session, exc)
                again = False
            finally:
                self._running.discard(session)
            if again:
                self._pending.setdefault(session, job)
            if session in self._pending:
                self._queue.put_nowait(session)
            elif not self._pending and not self._running:
                self._idle.set()

    def _failed(self, session: str, exc: Exception) -> None:
        kind = exc.kind if isinstance(exc, AnkkaError) else "internal_error"
        self.metrics.failed(kind)
        previous = self._failures.get(session)
        count = previous.count + 1 if previous else 1
        self._failures.pop(session, None)  # re-inserted last, so the oldest pause goes first
        self._failures[session] = _Failure(count, pause_until(count, self._clock.now()))
        while len(self._failures) > self._capacity:  # bounded: forget the oldest pause
            del self._failures[next(iter(self._failures))]
        if not isinstance(exc, AnkkaError):
            log.error("compaction failed unexpectedly", exc_info=exc)
        else:
            log.warning("compaction skipped (attempt %d): %s", count, exc)

    async def _view(self, session: str) -> SentView:
        view = self._views.pop(session) or SentView()
        view.apply_all(await self._journal.read(session, after=view.position))
        self._views.put(session, view)
        return view

    async def _compact(self, session: str, job: Job) -> bool:
        """One compaction of ``session``; ``True`` when it should be looked at again."""
        failure = self._failures.get(session)
        if failure is not None and self._clock.now() < failure.until:
            return False
        settings = job.settings
        view = await self._view(session)
        if not due(view, settings, self._clock.now()):
            return False
        cut = choose_cut(view, settings)
        if cut is None:
            return False
        provider = find_model(self.providers, job.model)
        if provider is None:
            raise ConfigurationError(f"the summariser's model {job.model!r} is not configured")
        if not await self._leases.acquire(session, self._holder, self._lease_ttl):
            return False  # another process is compacting it
        try:
            with compaction_span(self._spans, session, cut.replaced_chars) as span:
                record = await self._summarise(session, cut, job, provider)
                if span is not None:
                    compaction_ended(span, record)
            if record is None:
                return False  # another compaction landed since the cut: it stands
        finally:
            await self._leases.release(session, self._holder)
        self._failures.pop(session, None)
        self.metrics.recorded(record)
        return isinstance(record, HistoryCompacted)

    async def _summarise(
        self, session: str, cut: Cut, job: Job, provider: ModelProvider
    ) -> CompactionRecord | None:
        """Summarise, check, and journal the verdict; None when another compaction landed
        since the cut."""
        request = summary_request(cut.replaced, job.settings, replaced_chars=cut.replaced_chars)
        summary = await summarise(provider, request, self._spans)
        record = await verdict_record(summary, cut, job.settings, self._clock.now())
        async with self._turns.turn(session):
            view = await self._view(session)
            base = view.summary.through if view.summary is not None else 0
            if base != cut.base:
                return None
            await self._journal.append(session, [record], expected=view.position)
            self._wrote[session] = None
            while len(self._wrote) > self._capacity:  # bounded: the oldest is forgotten
                self._wrote.popitem(last=False)
        return record


def _footprint(view: SentView) -> int:
    return view.footprint
