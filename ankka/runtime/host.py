"""The runtime host: runs a service's turns on a journal store and configured providers.

For one request: build the agent's :class:`~ankka.runtime.agents.Turn` (pure), wait for the
session's turn, bring the session's folded conversation up to date from the journal, run the
loop, append the turn's messages in one atomic batch, and only then answer. A failed turn
writes nothing, so nothing committed before it is lost or half-overwritten.

Folded conversations are cached and brought up to date by reading only the events after the
cached position, so a turn costs one small read and one write, not a replay of the session.
The fold is what the model is sent (:class:`~ankka.runtime.compaction.view.SentView`): the
latest compaction summary, then the messages after it. After a turn is committed, a session
whose agent has compaction settings is handed to the compaction consumer, which the turn
never waits for. A runtime is an async context manager: entering it starts that consumer.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from ankka._kernel.clock import Clock, SystemClock
from ankka._kernel.errors import AnkkaError, ConfigurationError, NotFound
from ankka._kernel.ids import new_id
from ankka.runtime.agents import Service, Turn, TurnRequest
from ankka.runtime.compaction.consumer import Compactor, Job
from ankka.runtime.compaction.leases import CompactionLeases
from ankka.runtime.compaction.metrics import CompactionMetrics
from ankka.runtime.compaction.settings import Compaction, CompactionOverride
from ankka.runtime.compaction.view import SentView, full_history
from ankka.runtime.journal import events
from ankka.runtime.journal.store import JournalStore
from ankka.runtime.loop import Emit, TurnOutcome, run_turn
from ankka.runtime.messages import AssistantMessage, Message, Usage
from ankka.runtime.metrics import RuntimeMetrics
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.sessions import SessionQueue, SharedSessionLock

__all__ = ["Runtime", "SessionSummary", "TurnResult"]


@dataclass(frozen=True, slots=True)
class TurnResult:
    outcome: TurnOutcome
    effect: Turn

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
    compactions: int = 0
    compaction_usage: Usage = field(default_factory=Usage)


class _Conversations:
    """Folded conversations by session, least recently used evicted past ``capacity``."""

    def __init__(self, store: JournalStore, capacity: int) -> None:
        self._store = store
        self._capacity = capacity
        self._cache: OrderedDict[str, SentView] = OrderedDict()

    async def load(self, session: str) -> SentView:
        view = self._cache.pop(session, None) or SentView()
        view.apply_all(await self._store.read(session, after=view.position))
        self._remember(session, view)
        return view

    def _remember(self, session: str, view: SentView) -> None:
        self._cache[session] = view
        self._cache.move_to_end(session)
        while len(self._cache) > self._capacity:
            self._cache.popitem(last=False)

    def extend(self, session: str, after: int, added: tuple[Message, ...]) -> None:
        view = self._cache.get(session)
        if view is None:
            return
        view.append(after, added)
        self._remember(session, view)

    def forget(self, session: str) -> None:
        self._cache.pop(session, None)


class Runtime:
    def __init__(
        self,
        service: Service,
        *,
        store: JournalStore,
        providers: Mapping[str, ModelProvider],
        clock: Clock | None = None,
        metrics: RuntimeMetrics | None = None,
        cache_sessions: int = 1024,
        shared_lock: SharedSessionLock | None = None,
        compaction_override: CompactionOverride | None = None,
        compaction_providers: Mapping[str, ModelProvider] | None = None,
        compaction_leases: CompactionLeases | None = None,
        compaction_workers: int = 4,
    ) -> None:
        """``compaction_providers`` are the models summaries are asked of (default: the
        same ``providers``; tests give the summariser its own scripted provider)."""
        self.service = service
        self.store = store
        self.providers = dict(providers)
        self.clock = clock or SystemClock()
        self.metrics = metrics or RuntimeMetrics()
        self.queue = SessionQueue(shared_lock)
        self._conversations = _Conversations(store, cache_sessions)
        self._override = compaction_override or CompactionOverride({})
        self.compactor = Compactor(
            journal=store,
            turns=self.queue,
            providers=self.providers if compaction_providers is None else compaction_providers,
            clock=self.clock,
            metrics=CompactionMetrics(self.metrics.registry),
            leases=compaction_leases,
            workers=compaction_workers,
            cache_sessions=cache_sessions,
        )

    async def __aenter__(self) -> Runtime:
        await self.compactor.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def compaction(self, agent: str, effect: Turn) -> Compaction | None:
        """The compaction settings in force for a turn of ``agent``: the turn's, else the
        agent's declared default, then the deployment's ``ANKKA_COMPACTION_*`` over them."""
        declaration = self.service.declaration(agent)
        declared = effect.compaction or (declaration.compaction if declaration else None)
        return self._override.apply(declared)

    def plan(self, agent: str, session: str, message: str) -> tuple[Turn, ModelProvider]:
        """Build the agent's effect and find its model; no I/O."""
        declaration = self.service.declaration(agent)
        if declaration is None:
            known = ", ".join(sorted(self.service.agents)) or "none"
            raise NotFound(f"there is no agent {agent!r} in this service (agents: {known})")
        effect = declaration.handler(TurnRequest(agent, session, message))
        if not isinstance(effect, Turn):
            raise ConfigurationError(
                f"agent {agent!r}: its handler returned {type(effect).__name__}, not a Turn"
            )
        provider = self._provider(agent, effect.model, self.providers, "asks for")
        settings = self.compaction(agent, effect)
        if settings is not None and settings.model is not None:
            self._provider(agent, settings.model, self.compactor.providers, "is summarised by")
        return effect, provider

    def _provider(
        self, agent: str, model: str, providers: Mapping[str, ModelProvider], verb: str
    ) -> ModelProvider:
        provider = providers.get(model)
        if provider is None:
            configured = ", ".join(sorted(providers)) or "none"
            env = f"ANKKA_MODEL_{model.upper().replace('-', '_')}_PRESET"
            raise ConfigurationError(
                f"agent {agent!r} {verb} model {model!r}, which is not configured "
                f"(configured: {configured}); set {env} and its settings"
            )
        return provider

    async def run(
        self,
        agent: str,
        session: str,
        message: str,
        *,
        emit: Emit | None = None,
        planned: tuple[Turn, ModelProvider] | None = None,
    ) -> TurnResult:
        """Run one turn. ``planned`` is :meth:`plan`'s result when the caller already built it
        (the HTTP layer does, to learn the answer's shape), so the handler runs once."""
        effect, provider = planned or self.plan(agent, session, message)
        started = self.clock.monotonic()
        try:
            async with self.queue.turn(session):
                view = await self._conversations.load(session)
                position = view.position
                outcome = await run_turn(
                    effect,
                    history=view.messages,
                    agent=agent,
                    turn_id=new_id("turn"),
                    provider=provider,
                    clock=self.clock,
                    emit=emit,
                )
                if effect.write_memory:
                    batch = [events.encode(m) for m in outcome.messages]
                    try:
                        await self.store.append(session, batch, expected=position)
                    except BaseException:
                        self._conversations.forget(session)
                        raise
                    self._conversations.extend(session, position, outcome.messages)
        except AnkkaError as exc:
            self.metrics.turn_failed(agent, exc.kind)
            raise
        self.metrics.turn_finished(agent, outcome, self.clock.monotonic() - started)
        settings = self.compaction(agent, effect)
        if effect.write_memory and settings is not None:
            self.compactor.committed(session, Job(settings, settings.model or effect.model))
        return TurnResult(outcome, effect)

    async def messages(self, session: str, *, as_sent: bool = False) -> list[Message]:
        """The session's whole conversation as committed (compaction never removes a
        message), or with ``as_sent`` what the model is now shown from it (the summary, then
        the rest). Read from the store, not the turn cache, so a reader never waits behind
        the session's queue."""
        stored = await self.store.read(session)
        if as_sent:
            return SentView().apply_all(stored).messages
        return full_history(stored)

    async def summary(self, session: str) -> SessionSummary:
        pending = self.queue.pending(session)
        stored = await self.store.read(session)
        conversation = full_history(stored)
        view = SentView().apply_all(stored)
        usage = Usage()
        turns = 0
        for message in conversation:
            if isinstance(message, AssistantMessage) and message.turn_usage is not None:
                usage = usage + message.turn_usage
                turns += 1
        return SessionSummary(
            session,
            len(conversation),
            turns,
            pending,
            usage,
            compactions=view.compactions,
            compaction_usage=view.compaction_usage,
        )

    async def aclose(self) -> None:
        await self.compactor.__aexit__(None, None, None)
        every = (*self.providers.values(), *self.compactor.providers.values())
        for provider in {id(p): p for p in every}.values():
            await provider.aclose()
        await self.store.close()
