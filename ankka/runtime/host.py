"""The runtime host: runs a service's turns on a journal store and configured providers.

For one request: build the agent's :class:`~ankka.runtime.agents.Turn` (pure), wait for the
session's turn, bring the session's folded conversation up to date from the journal, run the
loop, append the turn's messages in one atomic batch, and only then answer. A failed turn
writes nothing, so nothing committed before it is lost or half-overwritten.

Folded conversations are cached and brought up to date by reading only the events after the
cached position, so a turn costs one small read and one write, not a replay of the session.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field

from ankka._kernel.clock import Clock, SystemClock
from ankka._kernel.errors import AnkkaError, ConfigurationError, NotFound
from ankka._kernel.ids import new_id
from ankka.runtime.agents import Service, Turn, TurnRequest
from ankka.runtime.journal import events
from ankka.runtime.journal.fold import apply, fold
from ankka.runtime.journal.store import JournalStore
from ankka.runtime.judgments import registry as judgment_registry
from ankka.runtime.judgments.guardrail import Judging
from ankka.runtime.judgments.judgment import Judgment
from ankka.runtime.judgments.plan import JudgmentPlan, JudgmentRequest
from ankka.runtime.judgments.seam import JudgmentProvider
from ankka.runtime.judgments.usage import JudgmentUsage
from ankka.runtime.judgments.verify import ask
from ankka.runtime.loop import Emit, TurnOutcome, run_turn
from ankka.runtime.messages import AssistantMessage, Message, Usage
from ankka.runtime.metrics import RuntimeMetrics
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.sessions import SessionQueue, SharedSessionLock

__all__ = ["Runtime", "SessionSummary", "TurnResult"]

log = logging.getLogger("ankka.runtime")


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
    judgment_usage: Usage = field(default_factory=Usage)


class _Conversations:
    """Folded conversations by session, least recently used evicted past ``capacity``."""

    def __init__(self, store: JournalStore, capacity: int) -> None:
        self._store = store
        self._capacity = capacity
        self._cache: OrderedDict[str, tuple[int, list[Message]]] = OrderedDict()

    async def load(self, session: str) -> tuple[int, list[Message]]:
        position, conversation = self._cache.pop(session, (0, []))
        for event in await self._store.read(session, after=position):
            apply(conversation, events.decode(event.kind, event.body))
            position = event.seq
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
        judges: Mapping[str, JudgmentProvider] | None = None,
    ) -> None:
        self.service = service
        self.store = store
        self.providers = dict(providers)
        self.judges = (
            dict(judges) if judges is not None else judgment_registry.judges_for(providers)
        )
        self.clock = clock or SystemClock()
        self.metrics = metrics or RuntimeMetrics()
        self.queue = SessionQueue(shared_lock)
        self._conversations = _Conversations(store, cache_sessions)

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
        provider = self.providers.get(effect.model)
        if provider is None:
            configured = ", ".join(sorted(self.providers)) or "none"
            env = f"ANKKA_MODEL_{effect.model.upper().replace('-', '_')}_PRESET"
            raise ConfigurationError(
                f"agent {agent!r} asks for model {effect.model!r}, which is not configured "
                f"(configured: {configured}); set {env} and its settings"
            )
        return effect, provider

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
        judging = Judging(self.judges)
        turn_id = new_id("turn")
        try:
            async with self.queue.turn(session):
                position, history = await self._conversations.load(session)
                try:
                    outcome = await run_turn(
                        effect,
                        history=history,
                        agent=agent,
                        turn_id=turn_id,
                        provider=provider,
                        clock=self.clock,
                        emit=emit,
                        judging=judging,
                    )
                except BaseException:
                    await self._judgment_usage_alone(session, agent, turn_id, judging)
                    raise
                spent = JudgmentUsage(judging.usage, agent, turn_id) if judging.spent else None
                if spent is not None:
                    self.metrics.judgment_tokens_used(spent.usage)
                if effect.write_memory:
                    records = [*outcome.messages, *([spent] if spent else [])]
                    batch = [events.encode(m) for m in records]
                    try:
                        new_position = await self.store.append(session, batch, expected=position)
                    except BaseException:
                        self._conversations.forget(session)
                        raise
                    self._conversations.extend(session, new_position, outcome.messages)
                else:
                    await self._judgment_usage_alone(session, agent, turn_id, judging)
        except AnkkaError as exc:
            self.metrics.turn_failed(agent, exc.kind)
            raise
        self.metrics.turn_finished(agent, outcome, self.clock.monotonic() - started)
        return TurnResult(outcome, effect)

    async def _judgment_usage_alone(
        self, session: str, agent: str, turn_id: str, judging: Judging
    ) -> None:
        """Record a turn's judgment tokens when it wrote no messages; best effort."""
        if not judging.spent:
            return
        record = JudgmentUsage(judging.usage, agent, turn_id)
        self.metrics.judgment_tokens_used(record.usage)
        try:
            position, _ = await self._conversations.load(session)
            await self.store.append(session, [events.encode(record)], expected=position)
        except Exception:
            log.warning("the judgment usage of turn %s was not recorded", turn_id, exc_info=True)
        self._conversations.forget(session)

    def plan_judgment(self, name: str, text: str) -> tuple[JudgmentPlan, JudgmentProvider]:
        """Build a judgment handler's plan and find its judgment provider; no I/O."""
        declaration = self.service.judgment_declaration(name)
        if declaration is None:
            known = ", ".join(sorted(self.service.judgments)) or "none"
            raise NotFound(
                f"there is no judgment handler {name!r} in this service (judgment handlers: "
                f"{known})"
            )
        plan = declaration.handler(JudgmentRequest(name, text))
        if not isinstance(plan, JudgmentPlan):
            raise ConfigurationError(
                f"judgment {name!r}: its handler returned {type(plan).__name__}, not a JudgmentPlan"
            )
        judge = judgment_registry.resolve(
            self.judges, self.providers, plan.model, asker=f"judgment {name!r}"
        )
        return plan, judge

    async def judge(self, name: str, text: str) -> Judgment:
        """Ask a judgment handler's questions about ``text``; the verified judgment."""
        plan, judge = self.plan_judgment(name, text)
        judgment = await ask(judge, plan.inquiry(), floor=plan.coverage_floor)
        self.metrics.judgment_finished(name, judgment.usage)
        return judgment

    async def messages(self, session: str) -> list[Message]:
        """The session's conversation as committed; read from the store, not the turn cache,
        so a reader never waits behind the session's queue."""
        return fold(await self.store.read(session))

    async def summary(self, session: str) -> SessionSummary:
        pending = self.queue.pending(session)
        stored = await self.store.read(session)
        conversation = fold(stored)
        usage = Usage()
        turns = 0
        for message in conversation:
            if isinstance(message, AssistantMessage) and message.turn_usage is not None:
                usage = usage + message.turn_usage
                turns += 1
        judged = Usage()
        for event in stored:
            if event.kind == JudgmentUsage.kind:
                record = events.decode(event.kind, event.body)
                assert isinstance(record, JudgmentUsage)
                judged = judged + record.usage
        return SessionSummary(session, len(conversation), turns, pending, usage, judged)

    async def aclose(self) -> None:
        for provider in self.providers.values():
            await provider.aclose()
        await self.store.close()
