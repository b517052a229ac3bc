"""What every driver works with, built once per runtime and shared: :class:`Context`.

The request turns (:class:`~.request.Runtime`), the approval desk
(:class:`~.approvals.ApprovalDesk`) and the task host (:class:`~.tasks.host.TaskHost`) take
one context, not a constructor parameter per seam each: the service, the journal with the
session fold cache and the per-session queue, the providers and judgment providers, the one
executor, the clock, metrics, the session policy, MCP servers, the approval index and the
compaction consumer. :meth:`Context.open` builds it; entering it starts the compaction
consumer, leaving it stops that and closes the providers and the journal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from ankka._kernel.clock import Clock, SystemClock
from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.agents import Service, Turn
from ankka.runtime.declare.autonomous import AutonomousAgent
from ankka.runtime.declare.compaction import Compaction, CompactionOverride
from ankka.runtime.declare.judgments.seam import JudgmentProvider
from ankka.runtime.declare.mcp import McpServer
from ankka.runtime.declare.policy import NotPermitted, Right, SessionPolicy
from ankka.runtime.declare.tools import RunnableTool
from ankka.runtime.engine.executor import Executor, Retry
from ankka.runtime.engine.lru import DEFAULT_CACHE_BYTES
from ankka.runtime.engine.metrics import RuntimeMetrics
from ankka.runtime.engine.planning import PlannedTurn
from ankka.runtime.engine.session import SessionCache, SessionState
from ankka.runtime.engine.sessions import SessionQueue
from ankka.runtime.engine.spans import provider_name
from ankka.runtime.features.compaction.consumer import Compactor, Job
from ankka.runtime.features.compaction.metrics import CompactionMetrics
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.providers.config import env_name, find_model
from ankka.runtime.providers.judges import judges_for
from ankka.runtime.records.mcp import McpListingRecord
from ankka.runtime.records.registry import Record
from ankka.runtime.records.session import SessionOpened
from ankka.runtime.store.approval_index import ApprovalIndex
from ankka.runtime.store.database import Transaction
from ankka.runtime.store.journal import Journal
from ankka.runtime.store.journal_store import JournalStore
from ankka.runtime.store.session_leases import CompactionLeases

if TYPE_CHECKING:
    from ankka.runtime.engine.spans import EngineSpans
    from ankka.runtime.features.mcp.servers import McpServers

__all__ = ["CompactionSetup", "Context", "Listed"]

T = TypeVar("T")

_VERBS: dict[Right, str] = {
    "read": "read",
    "write": "send turns to",
    "decide": "decide the approvals of",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionSetup:
    """How sessions are compacted here: the deployment's ``ANKKA_COMPACTION_*`` over what
    agents declare, the models summaries are asked of (default: the runtime's own; tests give
    the summariser its own scripted provider), the leases between pods, the workers."""

    override: CompactionOverride = field(default_factory=lambda: CompactionOverride({}))
    providers: Mapping[str, ModelProvider] | None = None
    leases: CompactionLeases | None = None
    workers: int = 4


@dataclass(frozen=True, slots=True)
class Listed:
    """The tools an agent's MCP servers list for one turn, and what the turn records of it."""

    tools: tuple[RunnableTool, ...] = ()
    records: tuple[McpListingRecord, ...] = ()


@dataclass(kw_only=True)
class Context:
    service: Service
    journal: Journal
    sessions: SessionCache
    queue: SessionQueue
    providers: Mapping[str, ModelProvider]
    judges: Mapping[str, JudgmentProvider]
    executor: Executor
    clock: Clock
    metrics: RuntimeMetrics
    policy: SessionPolicy
    compactor: Compactor
    override: CompactionOverride
    mcp: McpServers | None = None
    approvals: ApprovalIndex | None = None
    turn_retry: Retry | None = None
    spans: EngineSpans | None = None

    @classmethod
    def open(
        cls,
        service: Service,
        *,
        store: JournalStore,
        providers: Mapping[str, ModelProvider],
        clock: Clock | None = None,
        metrics: RuntimeMetrics | None = None,
        mcp: McpServers | None = None,
        compaction: CompactionSetup | None = None,
        approvals: ApprovalIndex | None = None,
        judges: Mapping[str, JudgmentProvider] | None = None,
        policy: SessionPolicy | None = None,
        cache_sessions: int = 1024,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        turn_retry: Retry | None = None,
        spans: EngineSpans | None = None,
    ) -> Context:
        """The context of a runtime serving ``service`` on ``store`` with ``providers``.
        ``judges``: one judgment provider per model that answers judgments (default: built
        over the providers' own transports). ``policy``: who may act on a session (default:
        as the service declares it). ``approvals``: the approval index, needed by a service
        whose tools require approval. ``turn_retry``: how a request turn's failed model call
        is made again (``ankka serve``: :class:`~ankka.runtime.providers.retry.TurnRetry`;
        default: never); a task's is its driver's own. ``cache_sessions`` and ``cache_bytes``
        bound the folds kept in memory (the session cache's and the compactor's). ``spans``:
        the engine's spans when tracing is on (``ankka serve`` builds them from ``OTEL_*``;
        None: nothing is traced)."""
        journal = Journal(store)
        clock = clock or SystemClock()
        metrics = metrics or RuntimeMetrics()
        setup = compaction or CompactionSetup()
        providers = dict(providers)
        judges = dict(judges) if judges is not None else judges_for(providers)
        if spans is not None:
            judges = spans.judges(judges)
        queue = SessionQueue(journal.session_lock())
        compactor = Compactor(
            journal=journal,
            turns=queue,
            providers=providers if setup.providers is None else setup.providers,
            clock=clock,
            metrics=CompactionMetrics(metrics.registry),
            leases=setup.leases,
            workers=setup.workers,
            cache_sessions=cache_sessions,
            cache_bytes=cache_bytes,
            spans=spans,
        )
        sessions = SessionCache(journal, cache_sessions, max_bytes=cache_bytes)
        metrics.watch_session_cache(lambda: sessions.bytes)
        for provider in providers.values():
            metrics.genai_providers[provider.name] = provider_name(provider)
        return cls(
            service=service,
            journal=journal,
            sessions=sessions,
            queue=queue,
            providers=providers,
            judges=judges,
            executor=Executor(
                clock=clock, judges=judges, retried=metrics.model_retried, spans=spans
            ),
            clock=clock,
            metrics=metrics,
            policy=policy if policy is not None else service.policy(),
            compactor=compactor,
            override=setup.override,
            mcp=mcp,
            approvals=approvals,
            turn_retry=turn_retry,
            spans=spans,
        )

    async def __aenter__(self) -> Context:
        """Start the compaction consumer (its workers are owned until :meth:`aclose`)."""
        await self.compactor.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.compactor.__aexit__(None, None, None)
        every = (*self.providers.values(), *self.compactor.providers.values())
        for provider in {id(p): p for p in every}.values():
            await provider.aclose()
        await self.journal.close()

    # --- what more than one driver asks ---------------------------------------------------

    def compaction_of(self, agent: str, declared: Compaction | None) -> Compaction | None:
        """The compaction settings in force for ``agent``: ``declared`` (a turn's, else the
        agent's default), then the deployment's ``ANKKA_COMPACTION_*`` over them."""
        if declared is None:
            request = self.service.declaration(agent)
            autonomous = self.service.autonomous_agents.get(agent)
            declared = (
                request.compaction
                if request is not None
                else autonomous.compaction
                if autonomous is not None
                else None
            )
        return self.override.apply(declared)

    def check_summariser(self, agent: str, settings: Compaction | None) -> None:
        """Refuse, naming the setting, an agent summarised by a model not configured."""
        model = settings.model if settings is not None else None
        if model is not None and find_model(self.compactor.providers, model) is None:
            configured = ", ".join(sorted(self.compactor.providers)) or "none"
            raise ConfigurationError(
                f"agent {agent!r} is summarised by model {model!r}, which is not configured "
                f"(configured: {configured}); set {env_name(model, 'PRESET')} and its settings"
            )

    def committed(self, session: str, settings: Compaction | None, model: str) -> None:
        """A session was committed: hand it to compaction when its agent compacts."""
        if settings is not None:
            self.compactor.committed(session, Job(settings, settings.model or model))

    async def mcp_tools(
        self,
        servers: tuple[McpServer, ...],
        *,
        agent: str,
        turn: str,
        folded: SessionState,
        effect: Turn | AutonomousAgent,
    ) -> Listed:
        """The tools ``servers`` list now for one turn of ``agent``, and what to record."""
        if self.mcp is None or not servers:
            return Listed()
        listed = await self.mcp.tools_for(
            [s.name for s in servers],
            approvals={s.name: s.needs_approval for s in servers},
            agent=agent,
            turn=turn,
            recorded=folded.mcp_digests,
            result_guardrails=effect.result_guardrails,
            description_guardrails=effect.description_guardrails,
        )
        return Listed(listed.tools, listed.records)

    async def turn_tools(
        self, planned: PlannedTurn, turn: str, folded: SessionState
    ) -> tuple[Turn, Listed]:
        """A request turn's effect with the tools its agent's MCP servers list now, and what
        the turn records of the listing."""
        declaration = self.service.declaration(planned.agent)
        servers = declaration.mcp_servers if declaration is not None else ()
        effect = planned.effect
        listed = await self.mcp_tools(
            servers, agent=planned.agent, turn=turn, folded=folded, effect=effect
        )
        if listed.tools:
            effect = replace(effect, tools=(*effect.tools, *listed.tools))
        return effect, listed

    async def record(self, session: str, folded: SessionState, records: Sequence[Record]) -> int:
        """Append ``records`` after ``folded``'s position and fold them in (the caller holds
        the session's turn lock). On any failure the cached fold is dropped, so the next load
        reads the journal."""
        position = folded.position
        try:
            last = await self.journal.append(session, records, expected=position)
        except BaseException:
            self.sessions.forget(session)
            raise
        self._fold_in(session, folded, position, records)
        return last

    async def commit(
        self,
        session: str,
        folded: SessionState,
        records: Sequence[Record],
        then: Callable[[Transaction], T],
    ) -> T:
        """:meth:`record`, and ``then`` (a statement of the store's other tables: a task's
        row) in the same transaction, one round trip (:meth:`Journal.commit`): what ``then``
        returned."""
        position = folded.position
        try:
            done = await self.journal.commit(session, records, expected=position, then=then)
        except BaseException:
            self.sessions.forget(session)
            raise
        self._fold_in(session, folded, position, records)
        return done.value

    def _fold_in(
        self, session: str, folded: SessionState, position: int, records: Sequence[Record]
    ) -> None:
        for offset, record in enumerate(records, 1):
            folded.add(position + offset, record)
        self.sessions.remember(session, folded)

    def allows(self, caller: str, right: Right, opened: SessionOpened | None) -> bool:
        """Whether ``caller`` holds ``right`` over a session ``opened`` says who created."""
        creator, agent = (opened.caller, opened.agent) if opened is not None else (None, None)
        return self.policy.allows(caller, right, creator=creator, agent=agent)

    def check(self, session: str, caller: str, right: Right, opened: SessionOpened | None) -> None:
        """Refuse (403) a caller without ``right`` over the session, naming caller and right."""
        if not self.allows(caller, right, opened):
            raise NotPermitted(
                f"caller {caller!r} may not {_VERBS[right]} session {session!r}: it is its "
                "creator's, the platform's, and of whoever its agent's access names"
            )

    def missing(self) -> dict[str, str]:
        """What this runtime waits for (``/readyz``): MCP servers without a session."""
        if self.mcp is None:
            return {}
        return {f"mcp server {name!r}": why for name, why in self.mcp.missing().items()}
