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

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ankka._kernel.clock import Clock
from ankka._kernel.errors import AnkkaError
from ankka._kernel.ids import new_id
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.declare.compaction import Compaction
from ankka.runtime.declare.judgments.judgment import Judgment
from ankka.runtime.declare.judgments.plan import JudgmentRequest
from ankka.runtime.declare.judgments.verify import ask
from ankka.runtime.declare.policy import LOCAL, NotPermitted, Right, SessionPolicy
from ankka.runtime.drivers.approvals import ApprovalDesk, Notify, Timers
from ankka.runtime.drivers.context import Context
from ankka.runtime.drivers.elicitations import ElicitationDesk
from ankka.runtime.drivers.judgments import plan_judgment
from ankka.runtime.drivers.turns import spent_records, take_turn, unwritten
from ankka.runtime.engine import planning
from ankka.runtime.engine.approval_state import ApprovalState
from ankka.runtime.engine.executor import Emit, Ledger
from ankka.runtime.engine.loop import TurnOutcome, TurnSuspension
from ankka.runtime.engine.metrics import RuntimeMetrics
from ankka.runtime.engine.planning import PlannedTurn
from ankka.runtime.engine.session import SessionState
from ankka.runtime.engine.view import SentView
from ankka.runtime.features.mcp.asking import asking
from ankka.runtime.records.accounting import (
    NOT_WRITTEN,
    SessionUsage,
    UnwrittenCalls,
    session_usage,
)
from ankka.runtime.records.approvals import ApprovalRequest
from ankka.runtime.records.fold import fold
from ankka.runtime.records.judgments import JudgmentUsage
from ankka.runtime.records.mcp import SampledCall
from ankka.runtime.records.messages import AssistantMessage, Message, ModelCall, Usage
from ankka.runtime.records.registry import Entry, Record
from ankka.runtime.records.session import SessionOpened, opened_by
from ankka.runtime.records.tasks import CONVERSATION_SESSION_PREFIX, TASK_SESSION_PREFIX

__all__ = ["Runtime", "SessionSummary", "TurnResult"]

log = logging.getLogger("ankka.runtime")


@dataclass(frozen=True, slots=True)
class TurnResult:
    """A finished turn's ``outcome``, or (``outcome`` None) the requests a suspended turn
    waits for (``awaiting``)."""

    outcome: TurnOutcome | None
    awaiting: tuple[ApprovalRequest, ...] = ()
    offered: frozenset[str] = frozenset()  # the names of the tools the turn offered

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
    created_at: datetime | None = None  # its first record's time
    updated_at: datetime | None = None  # its last record's (its last activity)
    agents: tuple[str, ...] = ()  # the agents that took its turns, by name

    @property
    def turns(self) -> int:
        return self.tally.turns

    @property
    def usage(self) -> Usage:
        return self.tally.written


def _agents(records: list[Record]) -> tuple[str, ...]:
    """The agents named by a session's records (its messages', a suspended turn's), by name."""
    named = (getattr(r, "agent", None) for r in records)
    return tuple(sorted({a for a in named if isinstance(a, str) and a}))


class Runtime:
    """Runs a service's request turns on a :class:`~.context.Context` (the store's own
    cross-process session lock, when it has one, keeps one turn at a time per session across
    pods), and answers the session reads. Its approval desk (:attr:`approvals`) shares the
    context. Entering it starts the compaction consumer and the approval timers."""

    def __init__(
        self, context: Context, *, timers: Timers | None = None, notify: Notify | None = None
    ) -> None:
        """``timers``: when approvals are noticed and how often expiries are looked for;
        ``notify`` receives the approval events."""
        self.context = context
        self.approvals = ApprovalDesk(context, timers=timers, notify=notify)
        self.questions = ElicitationDesk(context, self.approvals)
        self.approvals.questions = self.questions  # a resumed turn's servers ask it too

    # The context's seams, as the HTTP layer, the console and tests read them.
    @property
    def service(self) -> Service:
        return self.context.service

    @property
    def metrics(self) -> RuntimeMetrics:
        return self.context.metrics

    @property
    def clock(self) -> Clock:
        return self.context.clock

    @property
    def policy(self) -> SessionPolicy:
        return self.context.policy

    def plan(self, agent: str, session: str, message: str) -> PlannedTurn:
        """Build the agent's effect and find its model; no I/O. An approval rebuilds a
        suspended turn the same way, from its recorded ``planned.request``."""
        request = TurnRequest(agent, session, message)
        planned = planning.plan(self.service, self.context.providers, request)
        self.context.check_summariser(agent, self.compaction(agent, planned.effect))
        return planned

    def compaction(self, agent: str, effect: Turn) -> Compaction | None:
        """The compaction settings in force for a turn of ``agent``."""
        return self.context.compaction_of(agent, effect.compaction)

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
        must be allowed to write the session (:mod:`ankka.runtime.declare.policy`); a
        session's first batch records it as the creator. ``turn_id`` names the turn in the
        journal (default: a new id); A2A passes one derived from the message id, so the
        journal says whether a retried message's turn was committed
        (:mod:`ankka.runtime.serve.a2a`)."""
        ctx = self.context
        agent, session = planned.agent, planned.session
        if session.startswith(TASK_SESSION_PREFIX):
            raise NotPermitted(
                f"session {session!r} is a task's: only its task writes it (read it, or send "
                "the agent a message in a session of your own)"
            )
        if session.startswith(CONVERSATION_SESSION_PREFIX):
            raise NotPermitted(
                f"session {session!r} is a moderated conversation's: send it a message at "
                "POST /v1/conversations/{conversation}/sessions/{session} (docs/teams.md)"
            )
        started = ctx.clock.monotonic()
        ledger = ctx.executor.ledger()
        try:
            async with ctx.queue.turn(session):
                folded = await ctx.sessions.load(session)
                ctx.check(session, caller, "write", folded.opened)
                # A turn waiting for approval refuses this one (409 naming its requests); one
                # cut off after its last decision is ended first.
                await self.approvals.settle_cut_off(session, folded)
                opening = (SessionOpened(caller, agent),) if folded.position == 0 else ()
                turn = turn_id or new_id("turn")
                result = await self._take(planned, folded, turn, opening, ledger, emit)
        except AnkkaError as exc:
            ctx.metrics.turn_failed(agent, exc.kind)
            ctx.metrics.calls_made(agent, ledger.calls)
            raise
        if result.outcome is not None:
            seconds = ctx.clock.monotonic() - started
            ctx.metrics.turn_finished(agent, result.outcome, seconds, offered=result.offered)
            self.committed(planned)
        return result

    async def _take(
        self,
        planned: PlannedTurn,
        folded: SessionState,
        turn: str,
        opening: tuple[SessionOpened, ...],
        ledger: Ledger,
        emit: Emit | None,
    ) -> TurnResult:
        """The turn, committed (or suspended, or accounted as unwritten); the lock is held."""
        ctx, agent, session = self.context, planned.agent, planned.session
        # Only an MCP server asks a turn anything: an agent with none has no asker to make,
        # keep and close (the turn still runs with none set, so nothing can ask it).
        declared = ctx.service.agents.get(agent)
        asker = (
            self.questions.for_turn(
                session, agent, turn, folded.position, folded.opened, planned.provider, ledger
            )
            if declared is None or declared.mcp_servers
            else None
        )
        asked: Sequence[Record] = asker.records if asker is not None else ()
        try:
            effect, listed = await ctx.turn_tools(planned, turn, folded)
            # Leaving it closes the questions the turn left unanswered (its records then
            # hold their ends).
            async with asking(asker):
                outcome = await take_turn(
                    ctx, planned, effect, folded, turn, ledger=ledger, emit=emit
                )
        except AnkkaError as exc:
            records = (*asked, *unwritten(ledger, agent, turn, exc.kind))
            await self._account(session, folded, opening, records)
            raise
        except BaseException:
            # Cancelled (the caller left): what it spent recorded, best effort, shielded (a
            # stream's caller leaving cancels it again and again).
            records = (*asked, *unwritten(ledger, agent, turn, "cancelled"))
            await asyncio.shield(self._account(session, folded, opening, records, quietly=True))
            raise
        judged = (*asked, *self._judged(ledger, agent, turn))
        if isinstance(outcome, TurnSuspension):
            # Who opened the session goes first, with the tool listings.
            before: tuple[Record, ...] = (*opening, *listed.records, *judged)
            return TurnResult(None, await self.approvals.suspend(planned, folded, before, outcome))
        if planned.effect.write_memory:
            # Who opened the session and the tool listings the turn used go first, in the
            # turn's own batch; the tokens its judged guardrails spent last.
            records = (*opening, *listed.records, *outcome.messages, *judged)
            await ctx.record(session, folded, records)
        else:
            kept = unwritten(ledger, agent, turn, NOT_WRITTEN, outcome.calls)
            await self._account(session, folded, opening, kept)
        return TurnResult(outcome, offered=frozenset(tool.name for tool in effect.tools))

    def _judged(self, ledger: Ledger, agent: str, turn: str) -> tuple[JudgmentUsage, ...]:
        """The turn's judgment usage record, counted in the metrics."""
        records = spent_records(ledger, agent, turn)
        if records:
            self.metrics.judgment_tokens_used(records[0].usage)
        return records

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
            await self.context.record(session, folded, (*opening, *records))
        except Exception:
            if not quietly:
                raise
            log.warning("the accounting of a cancelled turn was not recorded", exc_info=True)

    def committed(self, planned: PlannedTurn) -> None:
        """A turn of ``planned`` was committed: hand its session to compaction."""
        if planned.effect.write_memory:
            settings = self.context.compaction_of(planned.agent, planned.effect.compaction)
            self.context.committed(planned.session, settings, planned.effect.model)

    def allows(self, caller: str, right: Right, opened: SessionOpened | None) -> bool:
        return self.context.allows(caller, right, opened)

    def missing(self) -> dict[str, str]:
        """What this runtime waits for (``/readyz``): MCP servers without a session."""
        return self.context.missing()

    # --- reads ---------------------------------------------------------------------------

    async def _entries(self, session: str, caller: str) -> list[Entry]:
        """The session's journal entries, for a caller allowed to read them."""
        entries = await self.context.journal.read(session)
        self.context.check(session, caller, "read", opened_by(e.record for e in entries))
        return entries

    async def calls(
        self, session: str, *, caller: str = LOCAL
    ) -> list[tuple[ModelCall, str, str | None, str | None]]:
        """Every model call of the session in order: (call, turn, why it was not written,
        the MCP server whose sampling request it answered)."""
        found: list[tuple[ModelCall, str, str | None, str | None]] = []
        for entry in await self._entries(session, caller):
            record = entry.record
            if isinstance(record, AssistantMessage) and record.call is not None:
                found.append((record.call, record.turn, None, None))
            elif isinstance(record, UnwrittenCalls):
                found.extend((call, record.turn, record.reason, None) for call in record.calls)
            elif isinstance(record, SampledCall):
                found.append((record.call, record.turn, None, record.server))
        return found

    async def judge(self, name: str, text: str) -> Judgment:
        """Ask a judgment handler's questions about ``text``; the verified judgment."""
        ctx = self.context
        plan, judge = plan_judgment(
            ctx.service, ctx.judges, ctx.providers, JudgmentRequest(name, text)
        )
        judgment = await ask(judge, plan.inquiry(), floor=plan.coverage_floor)
        ctx.metrics.judgment_finished(name, judgment.usage)
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
        pending = self.context.queue.pending(session)
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
            created_at=entries[0].at if entries else None,
            updated_at=entries[-1].at if entries else None,
            agents=_agents(records),
        )

    async def __aenter__(self) -> Runtime:
        """Start the compaction consumer and the approval timers (owned until
        :meth:`aclose`)."""
        await self.context.__aenter__()
        try:
            await self.approvals.__aenter__()  # the questions' recovery first (Askers)
        except BaseException:
            await self.context.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.approvals.__aexit__(None, None, None)
        await self.context.aclose()
