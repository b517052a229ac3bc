"""The runtime host: runs a service's turns on a journal store and configured providers.

For one turn: plan it (:mod:`ankka.runtime.engine.planning`: the agent's
:class:`~ankka.runtime.declare.agents.Turn` and its model, pure, one frozen
:class:`~ankka.runtime.engine.planning.PlannedTurn`), then run it: wait for the session's turn,
bring the session's folded conversation up to date from the journal, run the loop, append the
turn's messages through the :class:`~ankka.runtime.store.journal.Journal` in one atomic
batch, and only then answer. A failed turn writes nothing, so nothing committed before it is
lost or half-overwritten, but the model calls it made are journaled as an accounting record
(:mod:`ankka.runtime.records.accounting`). A session's first batch records who created it
(:class:`~ankka.runtime.serve.identity.SessionOpened`, with its agent); the session policy
(:mod:`ankka.runtime.declare.policy`) says who may read or write it: its creator, the platform, and
whoever the agent's or the service's access names.

Folded conversations are cached and brought up to date by reading only the events after the
cached position, so a turn costs one small read and one write, not a replay of the session.
The fold is what the model is sent (:class:`~ankka.runtime.engine.view.SentView`): the
latest compaction summary, then the messages after it. After a turn is committed, a session
whose agent has compaction settings is handed to the compaction consumer, which the turn
never waits for. A runtime is an async context manager: entering it starts that consumer.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ankka._kernel.clock import Clock, SystemClock
from ankka._kernel.errors import AnkkaError, ConfigurationError
from ankka._kernel.ids import new_id
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.declare.compaction import Compaction, CompactionOverride
from ankka.runtime.declare.judgments.guardrail import Judging
from ankka.runtime.declare.judgments.judgment import Judgment
from ankka.runtime.declare.judgments.plan import JudgmentRequest
from ankka.runtime.declare.judgments.seam import JudgmentProvider
from ankka.runtime.declare.judgments.verify import ask
from ankka.runtime.declare.policy import LOCAL, NotPermitted, Right, SessionPolicy
from ankka.runtime.drivers.approvals import ApprovalDesk, Notify
from ankka.runtime.drivers.judgments import plan_judgment
from ankka.runtime.engine import planning
from ankka.runtime.engine.approval_state import ApprovalState
from ankka.runtime.engine.loop import Emit, TurnOutcome, TurnSuspension, run_turn
from ankka.runtime.engine.metrics import RuntimeMetrics
from ankka.runtime.engine.planning import PlannedTurn
from ankka.runtime.engine.session import SessionCache, SessionState
from ankka.runtime.engine.sessions import SessionQueue
from ankka.runtime.engine.view import SentView
from ankka.runtime.features.compaction.consumer import Compactor, Job
from ankka.runtime.features.compaction.metrics import CompactionMetrics
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.providers.config import env_name, find_model
from ankka.runtime.providers.judges import judges_for
from ankka.runtime.records.accounting import (
    NOT_WRITTEN,
    SessionUsage,
    UnwrittenCalls,
    session_usage,
)
from ankka.runtime.records.approvals import ApprovalRequest
from ankka.runtime.records.fold import fold
from ankka.runtime.records.judgments import JudgmentUsage
from ankka.runtime.records.mcp import McpToolsRecord
from ankka.runtime.records.messages import AssistantMessage, Message, ModelCall, Usage
from ankka.runtime.records.registry import Entry, Record
from ankka.runtime.records.session import SessionOpened, opened_by
from ankka.runtime.records.tasks import TASK_SESSION_PREFIX
from ankka.runtime.store.approval_index import ApprovalIndex
from ankka.runtime.store.journal import Journal
from ankka.runtime.store.journal_store import JournalStore
from ankka.runtime.store.session_leases import CompactionLeases

if TYPE_CHECKING:
    from ankka.runtime.features.mcp.servers import McpServers

__all__ = ["Runtime", "SessionSummary", "TurnResult"]

log = logging.getLogger("ankka.runtime")

_VERBS: dict[Right, str] = {
    "read": "read",
    "write": "send turns to",
    "decide": "decide the approvals of",
}


@dataclass(frozen=True, slots=True)
class TurnResult:
    """A finished turn's ``outcome``, or (``outcome`` None) the requests a suspended turn
    waits for (``awaiting``)."""

    outcome: TurnOutcome | None
    awaiting: tuple[ApprovalRequest, ...] = ()

    @property
    def finished(self) -> TurnOutcome:
        if self.outcome is None:
            raise RuntimeError("the turn is suspended: it waits for approval")
        return self.outcome

    @property
    def reply(self) -> object:
        """The text, or the typed answer as JSON-ready data."""
        value = self.finished.value
        return value.model_dump(mode="json") if value is not None else self.finished.text


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """A session at a glance; ``tally`` splits its tokens between the turns written and the
    calls of turns that were not (:mod:`ankka.runtime.records.accounting`)."""

    session: str
    messages: int
    pending: int
    tally: SessionUsage
    compactions: int = 0
    compaction_rejections: int = 0
    compaction_usage: Usage = field(default_factory=Usage)
    awaiting: tuple[ApprovalRequest, ...] = ()
    judgment_usage: Usage = field(default_factory=Usage)

    @property
    def turns(self) -> int:
        return self.tally.turns

    @property
    def usage(self) -> Usage:
        return self.tally.written


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
        mcp: McpServers | None = None,
        compaction_override: CompactionOverride | None = None,
        compaction_providers: Mapping[str, ModelProvider] | None = None,
        compaction_leases: CompactionLeases | None = None,
        compaction_workers: int = 4,
        approvals: ApprovalIndex | None = None,
        approval_notice_seconds: float = 300.0,
        approval_tick_seconds: float = 1.0,
        notify: Notify | None = None,
        judges: Mapping[str, JudgmentProvider] | None = None,
        policy: SessionPolicy | None = None,
    ) -> None:
        """``compaction_providers`` are the models summaries are asked of (default: the
        same ``providers``; tests give the summariser its own scripted provider).
        ``approvals`` is the approval index (:mod:`ankka.runtime.drivers.approvals`), needed by a
        service whose tools require approval; ``notify`` receives the approval events.
        ``policy``: who may act on a session (default: as the service declares it)."""
        self.service = service
        self.policy = policy if policy is not None else service.policy()
        self.journal = Journal(store)
        self.providers = dict(providers)
        # One judgment provider per model that can answer judgments, over its transport.
        self.judges = dict(judges) if judges is not None else judges_for(self.providers)
        self.clock = clock or SystemClock()
        self.metrics = metrics or RuntimeMetrics()
        self.queue = SessionQueue(self.journal.session_lock())
        self.mcp = mcp
        self._conversations = SessionCache(self.journal, cache_sessions)
        self._override = compaction_override or CompactionOverride({})
        self.compactor = Compactor(
            journal=self.journal,
            turns=self.queue,
            providers=self.providers if compaction_providers is None else compaction_providers,
            clock=self.clock,
            metrics=CompactionMetrics(self.metrics.registry),
            leases=compaction_leases,
            workers=compaction_workers,
            cache_sessions=cache_sessions,
        )
        self.approvals = ApprovalDesk(
            self,
            approvals,
            notice_seconds=approval_notice_seconds,
            tick_seconds=approval_tick_seconds,
            notify=notify,
        )

    def plan(self, agent: str, session: str, message: str) -> PlannedTurn:
        """Build the agent's effect and find its model; no I/O. An approval rebuilds a
        suspended turn the same way, from its recorded ``planned.request``."""
        planned = planning.plan(self.service, self.providers, TurnRequest(agent, session, message))
        return self._check_summariser(planned)

    def plan_effect(self, request: TurnRequest, effect: Turn) -> PlannedTurn:
        """Plan an effect the caller built itself (a task iteration's); no I/O."""
        return self._check_summariser(planning.plan_effect(self.providers, request, effect))

    def compaction(self, agent: str, effect: Turn) -> Compaction | None:
        """The compaction settings in force for a turn of ``agent``: the turn's, else the
        agent's declared default, then the deployment's ``ANKKA_COMPACTION_*`` over them."""
        declaration = self.service.declaration(agent)
        declared = effect.compaction or (declaration.compaction if declaration else None)
        return self._override.apply(declared)

    def _check_summariser(self, planned: PlannedTurn) -> PlannedTurn:
        settings = self.compaction(planned.agent, planned.effect)
        model = settings.model if settings is not None else None
        if model is not None and find_model(self.compactor.providers, model) is None:
            configured = ", ".join(sorted(self.compactor.providers)) or "none"
            env = env_name(model, "PRESET")
            raise ConfigurationError(
                f"agent {planned.agent!r} is summarised by model {model!r}, which is not "
                f"configured (configured: {configured}); set {env} and its settings"
            )
        return planned

    async def run(
        self,
        planned: PlannedTurn,
        *,
        emit: Emit | None = None,
        caller: str = LOCAL,
        turn_id: str | None = None,
    ) -> TurnResult:
        """Run one planned turn: wait for the session's turn, bring its conversation up to
        date, run the loop, append the turn's messages, and only then return. ``caller``
        must be allowed to write the session (:mod:`ankka.runtime.declare.policy`); a session's
        first batch records it as the creator. ``turn_id`` names the turn in the journal
        (default: a new id); A2A passes one derived from the message id, so the journal says
        whether a retried message's turn was committed (:mod:`ankka.runtime.serve.a2a`)."""
        agent, session, effect = planned.agent, planned.session, planned.effect
        if session.startswith(TASK_SESSION_PREFIX):
            raise NotPermitted(
                f"session {session!r} is a task's: only its task writes it (read it, or send "
                "the agent a message in a session of your own)"
            )
        started = self.clock.monotonic()
        spent: list[ModelCall] = []
        judging = Judging(self.judges)
        try:
            async with self.queue.turn(session):
                folded = await self._conversations.load(session)
                self.check(session, caller, "write", folded.opened)
                # A turn waiting for approval refuses this one (409 naming its requests); one
                # cut off after its last decision is ended first.
                await self.approvals.settle_cut_off(session, folded)
                opening = (SessionOpened(caller, agent),) if folded.position == 0 else ()
                turn_id = turn_id or new_id("turn")
                try:
                    effect, listings = await self.with_mcp_tools(planned, turn_id, folded)
                    outcome = await run_turn(
                        effect,
                        history=folded.view.messages,
                        agent=agent,
                        turn_id=turn_id,
                        provider=planned.provider,
                        clock=self.clock,
                        emit=emit,
                        spent=spent,
                        judging=judging,
                    )
                except AnkkaError as exc:
                    unwritten = self.unwritten(planned, turn_id, exc.kind, spent, judging)
                    await self._account(session, folded, opening, unwritten)
                    raise
                except BaseException:
                    # Cancelled (the caller left): what it spent, best effort.
                    unwritten = self.unwritten(planned, turn_id, "cancelled", spent, judging)
                    await self._account(session, folded, opening, unwritten, quietly=True)
                    raise
                if isinstance(outcome, TurnSuspension):
                    # Who opened the session goes first, with the tool listings.
                    before: tuple[Record, ...] = (
                        *opening,
                        *listings,
                        *self.spent(planned, turn_id, judging),
                    )
                    awaiting = await self.approvals.suspend(planned, folded, before, outcome)
                    return TurnResult(None, awaiting)
                if effect.write_memory:
                    # Who opened the session and the tool listings the turn used go first,
                    # in the turn's own batch; the tokens its judged guardrails spent last.
                    records = (
                        *opening,
                        *listings,
                        *outcome.messages,
                        *self.spent(planned, turn_id, judging),
                    )
                    await self.record(session, folded, records)
                else:
                    unwritten = self.unwritten(
                        planned, turn_id, NOT_WRITTEN, outcome.calls, judging
                    )
                    await self._account(session, folded, opening, unwritten)
        except AnkkaError as exc:
            self.metrics.turn_failed(agent, exc.kind)
            self.metrics.calls_made(agent, spent)
            raise
        self.metrics.turn_finished(agent, outcome, self.clock.monotonic() - started)
        self.committed(planned)
        return TurnResult(outcome)

    def unwritten(
        self,
        planned: PlannedTurn,
        turn_id: str,
        reason: str,
        calls: Iterable[ModelCall],
        judging: Judging,
    ) -> tuple[Record, ...]:
        """What a turn that writes no messages still records: its model calls (as
        :class:`UnwrittenCalls`) and its judged guardrails' tokens; empty when neither."""
        made = tuple(calls)
        unwritten = (UnwrittenCalls(turn_id, planned.agent, reason, made),) if made else ()
        return (*unwritten, *self.spent(planned, turn_id, judging))

    async def _account(
        self,
        session: str,
        folded: SessionState,
        opening: tuple[SessionOpened, ...],
        records: tuple[Record, ...],
        *,
        quietly: bool = False,
    ) -> None:
        """Journal the accounting of a turn that writes no messages (when there is any),
        after who opened the session when it is new, so a session never starts unowned.
        ``quietly``: best effort, for a cancelled turn (not worth a new error over it)."""
        if not records:
            return
        try:
            await self.record(session, folded, (*opening, *records))
        except Exception:
            if not quietly:
                raise
            log.warning("the accounting of a cancelled turn was not recorded", exc_info=True)

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

    async def opener(self, session: str) -> SessionOpened | None:
        """Who opened ``session`` (its first journal record), for the policy's checks."""
        return opened_by(e.record for e in await self.journal.read(session))

    async def _entries(self, session: str, caller: str) -> list[Entry]:
        """The session's journal entries, for a caller allowed to read them."""
        entries = await self.journal.read(session)
        self.check(session, caller, "read", opened_by(e.record for e in entries))
        return entries

    async def calls(
        self, session: str, *, caller: str = LOCAL
    ) -> list[tuple[ModelCall, str, str | None]]:
        """Every model call of the session in order: (call, turn, why it was not written)."""
        found: list[tuple[ModelCall, str, str | None]] = []
        for entry in await self._entries(session, caller):
            record = entry.record
            if isinstance(record, AssistantMessage) and record.call is not None:
                found.append((record.call, record.turn, None))
            elif isinstance(record, UnwrittenCalls):
                found.extend((call, record.turn, record.reason) for call in record.calls)
        return found

    async def load(self, session: str) -> SessionState:
        """The session's folded state, brought up to date (call with its turn lock held)."""
        return await self._conversations.load(session)

    async def record(self, session: str, folded: SessionState, records: tuple[Record, ...]) -> int:
        """Append ``records`` after ``folded``'s position and fold them in; the turn lock is
        held. On any failure the cached fold is dropped (the next load reads the journal)."""
        position = folded.position
        try:
            last = await self.journal.append(session, records, expected=position)
        except BaseException:
            self._conversations.forget(session)
            raise
        for offset, record in enumerate(records, 1):
            folded.add(position + offset, record)
        self._conversations.remember(session, folded)
        return last

    def committed(self, planned: PlannedTurn) -> None:
        """A turn of ``planned`` was committed: hand its session to compaction."""
        settings = self.compaction(planned.agent, planned.effect)
        if planned.effect.write_memory and settings is not None:
            model = settings.model or planned.effect.model
            self.compactor.committed(planned.session, Job(settings, model))

    async def with_mcp_tools(
        self, planned: PlannedTurn, turn_id: str, folded: SessionState
    ) -> tuple[Turn, tuple[McpToolsRecord, ...]]:
        """The effect with the tools its agent's MCP servers list now, and what to record."""
        effect = planned.effect
        declaration = self.service.declaration(planned.agent)
        if self.mcp is None or declaration is None or not declaration.mcp_servers:
            return effect, ()
        listed = await self.mcp.tools_for(
            [s.name for s in declaration.mcp_servers],
            approvals={s.name: s.needs_approval for s in declaration.mcp_servers},
            agent=planned.agent,
            turn=turn_id,
            recorded=folded.mcp_digests,
            result_guardrails=effect.result_guardrails,
            description_guardrails=effect.description_guardrails,
        )
        return replace(effect, tools=(*effect.tools, *listed.tools)), listed.records

    def missing(self) -> dict[str, str]:
        """What this runtime waits for (``/readyz``): MCP servers without a session."""
        if self.mcp is None:
            return {}
        return {f"mcp server {name!r}": why for name, why in self.mcp.missing().items()}

    def spent(
        self, planned: PlannedTurn, turn_id: str, judging: Judging
    ) -> tuple[JudgmentUsage, ...]:
        """The turn's judgment usage record (none when no judged guardrail ran), counted."""
        if not judging.spent:
            return ()
        self.metrics.judgment_tokens_used(judging.usage)
        return (JudgmentUsage(judging.usage, planned.agent, turn_id),)

    async def judge(self, name: str, text: str) -> Judgment:
        """Ask a judgment handler's questions about ``text``; the verified judgment."""
        plan, judge = plan_judgment(
            self.service, self.judges, self.providers, JudgmentRequest(name, text)
        )
        judgment = await ask(judge, plan.inquiry(), floor=plan.coverage_floor)
        self.metrics.judgment_finished(name, judgment.usage)
        return judgment

    async def messages(
        self, session: str, *, as_sent: bool = False, caller: str = LOCAL
    ) -> list[Message]:
        """The session's whole conversation as committed (compaction never removes a
        message), or with ``as_sent`` what the model is now shown from it (the summary, then
        the rest). Read from the journal, not the turn cache, so a reader never waits behind
        the session's queue."""
        entries = await self._entries(session, caller)
        if as_sent:
            return SentView().apply_all(entries).messages
        return fold(e.record for e in entries)

    async def summary(self, session: str, *, caller: str = LOCAL) -> SessionSummary:
        pending = self.queue.pending(session)
        entries = await self._entries(session, caller)
        records = [e.record for e in entries]
        view = SentView().apply_all(entries)
        state = ApprovalState()
        for e in entries:
            state.add(e.seq, e.record)
        awaiting = state.current.undecided if state.current is not None else ()
        judged = Usage()
        for record in records:
            if isinstance(record, JudgmentUsage):
                judged = judged + record.usage
        return SessionSummary(
            session,
            len(fold(records)),
            pending,
            session_usage(records),
            judgment_usage=judged,
            compactions=view.compactions,
            compaction_rejections=view.rejected,
            compaction_usage=view.compaction_usage,
            awaiting=awaiting,
        )

    async def __aenter__(self) -> Runtime:
        """Start the compaction consumer (its workers are owned until :meth:`aclose`)."""
        await self.compactor.__aenter__()
        try:
            await self.approvals.__aenter__()
        except BaseException:
            await self.compactor.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.approvals.__aexit__(None, None, None)
        await self.compactor.__aexit__(None, None, None)
        every = (*self.providers.values(), *self.compactor.providers.values())
        for provider in {id(p): p for p in every}.values():
            await provider.aclose()
        await self.journal.close()
