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
from collections.abc import Mapping
from dataclasses import dataclass

from ankka._kernel.clock import Clock, SystemClock
from ankka._kernel.errors import AnkkaError
from ankka._kernel.ids import new_id
from ankka.runtime import planning
from ankka.runtime.agents import Service, Turn, TurnRequest
from ankka.runtime.journal.fold import apply
from ankka.runtime.journal.journal import Journal
from ankka.runtime.journal.store import JournalStore
from ankka.runtime.loop import Emit, TurnOutcome, run_turn
from ankka.runtime.messages import AssistantMessage, Message, Usage
from ankka.runtime.metrics import RuntimeMetrics
from ankka.runtime.planning import PlannedTurn
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.sessions import SessionQueue

__all__ = ["Runtime", "SessionSummary", "TurnResult"]


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
    session: str
    messages: int
    turns: int
    pending: int
    usage: Usage


class _Conversations:
    """Folded conversations by session, least recently used evicted past ``capacity``."""

    def __init__(self, journal: Journal, capacity: int) -> None:
        self._journal = journal
        self._capacity = capacity
        self._cache: OrderedDict[str, tuple[int, list[Message]]] = OrderedDict()

    async def load(self, session: str) -> tuple[int, list[Message]]:
        position, conversation = self._cache.pop(session, (0, []))
        for entry in await self._journal.read(session, after=position):
            apply(conversation, entry.record)
            position = entry.seq
        self._remember(session, position, conversation)
        return position, conversation

    def _remember(self, session: str, position: int, conversation: list[Message]) -> None:
        self._cache[session] = (position, conversation)
        self._cache.move_to_end(session)
        while len(self._cache) > self._capacity:
            self._cache.popitem(last=False)

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

    async def run(self, planned: PlannedTurn, *, emit: Emit | None = None) -> TurnResult:
        """Run one planned turn: wait for the session's turn, bring its conversation up to
        date, run the loop, append the turn's messages, and only then return."""
        agent, session, effect = planned.agent, planned.session, planned.effect
        started = self.clock.monotonic()
        try:
            async with self.queue.turn(session):
                position, history = await self._conversations.load(session)
                outcome = await run_turn(
                    effect,
                    history=history,
                    agent=agent,
                    turn_id=new_id("turn"),
                    provider=planned.provider,
                    clock=self.clock,
                    emit=emit,
                )
                if effect.write_memory:
                    try:
                        new_position = await self.journal.append(
                            session, outcome.messages, expected=position
                        )
                    except BaseException:
                        self._conversations.forget(session)
                        raise
                    self._conversations.extend(session, new_position, outcome.messages)
        except AnkkaError as exc:
            self.metrics.turn_failed(agent, exc.kind)
            raise
        self.metrics.turn_finished(agent, outcome, self.clock.monotonic() - started)
        return TurnResult(outcome)

    async def messages(self, session: str) -> list[Message]:
        """The session's conversation as committed; read from the journal, not the turn
        cache, so a reader never waits behind the session's queue."""
        return await self.journal.conversation(session)

    async def summary(self, session: str) -> SessionSummary:
        pending = self.queue.pending(session)
        conversation = await self.messages(session)
        usage = Usage()
        turns = 0
        for message in conversation:
            if isinstance(message, AssistantMessage) and message.turn_usage is not None:
                usage = usage + message.turn_usage
                turns += 1
        return SessionSummary(session, len(conversation), turns, pending, usage)

    async def __aenter__(self) -> Runtime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for provider in self.providers.values():
            await provider.aclose()
        await self.journal.close()
