"""The runtime host: runs a service's turns on a journal store and configured providers.

For one turn: plan it (:mod:`ankka.runtime.planning`: the agent's
:class:`~ankka.runtime.agents.Turn` and its model, pure, one frozen
:class:`~ankka.runtime.planning.PlannedTurn`), then run it: wait for the session's turn,
bring the session's folded conversation up to date from the journal, run the loop, append the
turn's messages through the :class:`~ankka.runtime.journal.journal.Journal` in one atomic
batch, and only then answer. A failed turn writes nothing, so nothing committed before it is
lost or half-overwritten.

Folded conversations are cached and brought up to date by reading only the events after the
cached position, so a turn costs one small read and one write, not a replay of the session.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ankka._kernel.clock import Clock, SystemClock
from ankka._kernel.errors import AnkkaError
from ankka._kernel.ids import new_id
from ankka.runtime import planning
from ankka.runtime.accounting import NOT_WRITTEN, SessionUsage, UnwrittenCalls, session_usage
from ankka.runtime.agents import Service, Turn, TurnRequest
from ankka.runtime.identity import LOCAL, NotPermitted, SessionOpened, may_use
from ankka.runtime.journal.events import Record
from ankka.runtime.journal.fold import apply, fold
from ankka.runtime.journal.journal import Journal
from ankka.runtime.journal.store import JournalStore
from ankka.runtime.loop import Emit, TurnOutcome, run_turn
from ankka.runtime.messages import AssistantMessage, Message, ModelCall, Usage
from ankka.runtime.metrics import RuntimeMetrics
from ankka.runtime.planning import PlannedTurn
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.sessions import SessionQueue

__all__ = ["Runtime", "SessionSummary", "TurnResult"]


def _creator_of(records: Iterable[Record]) -> str | None:
    """Who created the session: its first record says (sessions older than the record: None)."""
    for record in records:
        return record.caller if isinstance(record, SessionOpened) else None
    return None


@dataclass(frozen=True, slots=True)
class TurnResult:
    outcome: TurnOutcome

    @property
    def reply(self) -> object:
        """The text, or the typed answer as JSON-ready data."""
        value = self.outcome.value
        return value.model_dump(mode="json") if value is not None else self.outcome.text


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """A session at a glance; ``tally`` splits its tokens between the turns written and the
    calls of turns that were not (:mod:`ankka.runtime.accounting`)."""

    session: str
    messages: int
    pending: int
    tally: SessionUsage

    @property
    def turns(self) -> int:
        return self.tally.turns

    @property
    def usage(self) -> Usage:
        return self.tally.written


class _Conversations:
    """Folded conversations by session, least recently used evicted past ``capacity``; with
    each, the caller that created the session (its ``session_opened`` record), if any."""

    def __init__(self, journal: Journal, capacity: int) -> None:
        self._journal = journal
        self._capacity = capacity
        self._cache: OrderedDict[str, tuple[int, list[Message]]] = OrderedDict()
        self.creators: dict[str, str] = {}

    async def load(self, session: str) -> tuple[int, list[Message]]:
        position, conversation = self._cache.pop(session, (0, []))
        for entry in await self._journal.read(session, after=position):
            if isinstance(entry.record, SessionOpened):
                self.creators[session] = entry.record.caller
            apply(conversation, entry.record)
            position = entry.seq
        self._remember(session, position, conversation)
        return position, conversation

    def _remember(self, session: str, position: int, conversation: list[Message]) -> None:
        self._cache[session] = (position, conversation)
        self._cache.move_to_end(session)
        while len(self._cache) > self._capacity:
            evicted, _ = self._cache.popitem(last=False)
            self.creators.pop(evicted, None)

    def extend(self, session: str, position: int, added: tuple[Message, ...]) -> None:
        cached = self._cache.get(session)
        if cached is None:
            return
        conversation = cached[1]
        for message in added:
            apply(conversation, message)
        self._remember(session, position, conversation)

    def forget(self, session: str) -> None:
        self._cache.pop(session, None)
        self.creators.pop(session, None)


class Runtime:
    """Runs a service's turns. The store's own cross-process session lock, when it has one,
    keeps one turn at a time per session across pods."""

    def __init__(
        self,
        service: Service,
        *,
        store: JournalStore,
        providers: Mapping[str, ModelProvider],
        clock: Clock | None = None,
        metrics: RuntimeMetrics | None = None,
        cache_sessions: int = 1024,
    ) -> None:
        self.service = service
        self.journal = Journal(store)
        self.providers = dict(providers)
        self.clock = clock or SystemClock()
        self.metrics = metrics or RuntimeMetrics()
        self.queue = SessionQueue(self.journal.session_lock())
        self._conversations = _Conversations(self.journal, cache_sessions)

    def plan(self, agent: str, session: str, message: str) -> PlannedTurn:
        """Build the agent's effect and find its model; no I/O. An approval rebuilds a
        suspended turn the same way, from its recorded ``planned.request``."""
        return planning.plan(self.service, self.providers, TurnRequest(agent, session, message))

    def plan_effect(self, request: TurnRequest, effect: Turn) -> PlannedTurn:
        """Plan an effect the caller built itself (a task iteration's); no I/O."""
        return planning.plan_effect(self.providers, request, effect)

    async def run(
        self, planned: PlannedTurn, *, emit: Emit | None = None, caller: str = LOCAL
    ) -> TurnResult:
        """Run one planned turn: wait for the session's turn, bring its conversation up to
        date, run the loop, append the turn's messages, and only then return. ``caller``
        must be allowed to write the session (:func:`~ankka.runtime.identity.may_use`); a
        session's first turn records it as the creator."""
        agent, session, effect = planned.agent, planned.session, planned.effect
        started = self.clock.monotonic()
        turn_id = new_id("turn")
        spent: list[ModelCall] = []
        try:
            async with self.queue.turn(session):
                position, history = await self._conversations.load(session)
                self._check(session, caller)
                opening = (SessionOpened(caller),) if position == 0 else ()
                try:
                    outcome = await run_turn(
                        effect,
                        history=history,
                        agent=agent,
                        turn_id=turn_id,
                        provider=planned.provider,
                        clock=self.clock,
                        emit=emit,
                        spent=spent,
                    )
                except AnkkaError as exc:
                    unwritten = UnwrittenCalls(turn_id, agent, exc.kind, tuple(spent))
                    await self._account(session, position, unwritten, opening)
                    raise
                if not effect.write_memory:
                    unwritten = UnwrittenCalls(turn_id, agent, NOT_WRITTEN, outcome.calls)
                    await self._account(session, position, unwritten, opening)
                else:
                    try:
                        new_position = await self.journal.append(
                            session, [*opening, *outcome.messages], expected=position
                        )
                    except BaseException:
                        self._conversations.forget(session)
                        raise
                    self._conversations.extend(session, new_position, outcome.messages)
                    self._remember_creator(session, opening)
        except AnkkaError as exc:
            self.metrics.turn_failed(agent, exc.kind)
            self.metrics.calls_made(agent, spent)
            raise
        self.metrics.turn_finished(agent, outcome, self.clock.monotonic() - started)
        return TurnResult(outcome)

    async def _account(
        self,
        session: str,
        position: int,
        record: UnwrittenCalls,
        opening: tuple[SessionOpened, ...],
    ) -> None:
        """Journal the calls of a turn that writes no messages (when it made any)."""
        if not record.calls:
            return
        try:
            new_position = await self.journal.append(session, [*opening, record], expected=position)
        except BaseException:
            self._conversations.forget(session)
            raise
        self._conversations.extend(session, new_position, ())
        self._remember_creator(session, opening)

    def _remember_creator(self, session: str, opening: tuple[SessionOpened, ...]) -> None:
        if opening:
            self._conversations.creators[session] = opening[0].caller

    def _check(self, session: str, caller: str) -> None:
        """Refuse ``caller`` a session it may not use (one another caller created); the
        creator is known from the conversation just loaded, so this reads nothing."""
        creator = self._conversations.creators.get(session)
        if not may_use(caller, creator):
            raise NotPermitted(
                f"caller {caller!r} may not use session {session!r}: another caller created "
                "it (a session is its creator's and the platform's)"
            )

    async def _records(self, session: str, caller: str) -> list[Record]:
        """The session's records, for a caller allowed to read them."""
        records = [entry.record for entry in await self.journal.read(session)]
        if not may_use(caller, _creator_of(records)):
            raise NotPermitted(
                f"caller {caller!r} may not read session {session!r}: another caller created it"
            )
        return records

    async def calls(
        self, session: str, *, caller: str = LOCAL
    ) -> list[tuple[ModelCall, str, str | None]]:
        """Every model call of the session in order: (call, turn, why it was not written)."""
        found: list[tuple[ModelCall, str, str | None]] = []
        for record in await self._records(session, caller):
            if isinstance(record, AssistantMessage) and record.call is not None:
                found.append((record.call, record.turn, None))
            elif isinstance(record, UnwrittenCalls):
                found.extend((call, record.turn, record.reason) for call in record.calls)
        return found

    async def messages(self, session: str, *, caller: str = LOCAL) -> list[Message]:
        """The session's conversation as committed; read from the journal, not the turn
        cache, so a reader never waits behind the session's queue."""
        return fold(await self._records(session, caller))

    async def summary(self, session: str, *, caller: str = LOCAL) -> SessionSummary:
        pending = self.queue.pending(session)
        records = await self._records(session, caller)
        return SessionSummary(session, len(fold(records)), pending, session_usage(records))

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for provider in self.providers.values():
            await provider.aclose()
        await self.journal.close()
