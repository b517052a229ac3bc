"""Suspend, decide, resume, expire: the approval paths of a request agent's turns.

Every path holds the session's turn lock (the in-process queue, and PostgreSQL's advisory lock
across pods) from reading the journal to its last append, so:

- a decision is checked against the journal (the digest, a first decision) and recorded
  before anything it allows runs;
- the last decision of a turn resumes it *under the same lock hold*: the handler is planned
  again on the recorded input (handlers do no I/O), each approved call's start is appended
  (:class:`~.records.ApprovedCallStarted`, which spends the approval) before the tool runs,
  and the turn goes on from the recorded messages;
- whoever takes the lock later and finds a suspended turn whose requests are all decided knows
  the resumer died (it would still hold the lock): the turn was cut off, and is ended, never
  resumed, so an approved call runs at most once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ankka._kernel.errors import AnkkaError, ConfigurationError, NotFound
from ankka.runtime.declare.agents import TurnRequest
from ankka.runtime.drivers.approval_errors import (
    ApprovalConflict,
    HandlerGone,
    SessionBusy,
    refuse_decided,
    refuse_digest,
)
from ankka.runtime.drivers.context import Context
from ankka.runtime.drivers.recovery import LOCK_WAIT, cause, turn_within
from ankka.runtime.drivers.turns import Resumption, spent_records, take_turn, unwritten
from ankka.runtime.engine import planning
from ankka.runtime.engine.approval_state import ApprovalState, Suspension
from ankka.runtime.engine.executor import Ledger
from ankka.runtime.engine.loop import TurnOutcome, TurnSuspension
from ankka.runtime.engine.planning import PlannedTurn
from ankka.runtime.engine.session import SessionState
from ankka.runtime.engine.steps import Decided as Verdicts
from ankka.runtime.engine.steps import RunTool, Verdict
from ankka.runtime.features.mcp.asking import Askers, asking
from ankka.runtime.records.accounting import UnwrittenCalls
from ankka.runtime.records.approvals import (
    ApprovalDecided,
    ApprovalRequest,
    ApprovedCallStarted,
    Decision,
    ResumedCall,
    TurnEnded,
    TurnSuspended,
    digest,
    requests_for,
)
from ankka.runtime.records.messages import AssistantMessage, ModelCall, ToolCall
from ankka.runtime.records.registry import Record
from ankka.runtime.records.session import opened_by
from ankka.runtime.store.approval_index import ApprovalIndex, IndexRow

__all__ = ["ApprovalDesk", "Decided", "Notify", "Timers"]

log = logging.getLogger("ankka.approvals")

PLATFORM = "platform"
EXPIRIES_AT_ONCE = 16  # the timers' expiries run side by side, at most this many at a time
TASK_SESSION = "task:"  # a task's records are the journal session task:<id>
CUT_OFF = (
    "this turn was cut off after its last decision (the runtime stopped while resuming it); "
    "it is ended, not resumed, and no approved call of it is run again"
)
CANCELLED = (
    "this turn's resume was cancelled (its caller left or the runtime stopped); it is ended, "
    "not resumed again"
)
Notify = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Timers:
    """``notice_seconds`` before a request's limit ``approval_expiring`` is sent; the durable
    timers are looked at every ``tick_seconds``."""

    notice_seconds: float = 300.0
    tick_seconds: float = 1.0


@dataclass(frozen=True, slots=True)
class Decided:
    """What a decision led to: ``recorded`` (others still wait), ``completed`` (the turn
    resumed and finished: ``outcome``), ``awaiting_approval`` (it resumed and waits again),
    ``resumed`` (a task's last decision: its instance goes on), or ``ended``."""

    decision: ApprovalDecided
    status: str
    pending: tuple[ApprovalRequest, ...] = ()
    outcome: TurnOutcome | None = None
    reason: str = ""


def _log_notice(event: str, data: dict[str, Any]) -> None:
    log.info("%s %s", event, data)


class ApprovalDesk:
    def __init__(
        self, context: Context, *, timers: Timers | None = None, notify: Notify | None = None
    ) -> None:
        self._context = context
        self.index = context.approvals
        self.timers = timers or Timers()
        self.notify: Notify = notify or _log_notice
        # Told of a task's decision (task id, the event's data, whether it was the last).
        self.task_decided: Callable[[str, dict[str, Any], bool], None] | None = None
        self._timer: asyncio.Task[None] | None = None
        self._expiring = asyncio.Semaphore(EXPIRIES_AT_ONCE)
        # What a resumed turn's MCP servers ask during its calls (the runtime's desk).
        self.questions: Askers | None = None

    # --- suspending ----------------------------------------------------------------------

    async def suspend(
        self,
        planned: PlannedTurn,
        folded: SessionState,
        listings: Sequence[Record],
        suspension: TurnSuspension,
    ) -> tuple[ApprovalRequest, ...]:
        """Record the suspended turn (timers first, then one journal append)."""
        index = need_index(self.index, planned.agent, suspension.waiting)
        ctx = self._context
        now = ctx.clock.now()
        position = folded.position + len(listings) + 1  # where TurnSuspended will be
        tools = {t.name: t for t in planned.effect.tools}

        def timeout_of(call: ToolCall) -> float | None:
            found = tools.get(call.name)
            rule = found.approval if found is not None else None
            return rule.timeout if rule is not None else None

        requests = requests_for(suspension.waiting, timeout_of, position=position, now=now)
        record = TurnSuspended(
            suspension.turn,
            planned.agent,
            planned.message,
            suspension.messages,
            tuple(requests),
            suspension.trace,
        )
        await index.schedule(
            planned.session, planned.agent, [(r.id, r.tool, r.expires_at) for r in requests], now
        )
        try:
            await ctx.record(planned.session, folded, (*listings, record))
        except BaseException:
            with contextlib.suppress(AnkkaError):
                await index.drop([r.id for r in requests])
            raise
        ctx.metrics.work.requested(planned.agent, [r.tool for r in requests])
        for r in requests:
            self.notify(
                "approval_requested",
                {"session": planned.session, "agent": planned.agent, **r.shown()},
            )
        return tuple(requests)

    # --- under the turn lock: what a suspended session allows ----------------------------

    async def settle_cut_off(self, session: str, folded: SessionState) -> None:
        """Called with the turn lock held. A suspended turn whose requests are all decided
        was cut off (its resumer would hold the lock): end it. One still waiting refuses
        whatever wanted the lock for a new turn."""
        current = folded.approvals.current
        if current is None:
            return
        if current.all_decided:
            await self._end(session, folded, current, "cut_off", self._cut_off_reason(current))
            return
        ids = ", ".join(r.id for r in current.undecided)
        raise ApprovalConflict(
            f"session {session!r} has a turn waiting for approval ({ids}); decide it with "
            "POST /v1/approvals/{id} before starting another turn"
        )

    @staticmethod
    def _cut_off_reason(current: Suspension) -> str:
        if not current.started:
            return CUT_OFF
        started = ", ".join(sorted(current.started))
        return f"{CUT_OFF} (the start of approved call(s) {started} was recorded)"

    @staticmethod
    def _states(current: Suspension) -> dict[str, str]:
        return {a: d.decision for a, d in current.decisions.items()}

    async def _end(
        self,
        session: str,
        folded: SessionState,
        current: Suspension,
        cause: str,
        reason: str,
        spent: tuple[Record, ...] | None = None,
    ) -> None:
        """End the suspended turn. ``spent``: the accounting of what it spent resumed; None
        (its resumer is gone or it never resumed): the calls it made before suspending and
        those a resume recorded as they returned, as :class:`UnwrittenCalls` in the same
        append as its end, so they are counted once however often the ending is
        tried, and in the metrics once it is recorded."""
        made = current.all_calls if spent is None else ()
        if spent is None:
            spent = (
                (UnwrittenCalls(current.turn, current.record.agent, cause, made),) if made else ()
            )
        ended = TurnEnded(current.turn, cause, reason)
        await self._context.record(session, folded, (*spent, ended))
        self._context.metrics.calls_made(current.record.agent, made)
        if self.index is not None:
            await self.index.close_session(session, self._states(current))
        log.warning("session %s: turn %s ended (%s): %s", session, current.turn, cause, reason)

    # --- deciding ------------------------------------------------------------------------

    async def decide(
        self,
        approval: str,
        decision: Decision,
        given_digest: str | None,
        *,
        reason: str = "",
        decided_by: str,
        caller: str | None = None,
        lock_wait: float | None = None,
    ) -> Decided:
        """Record a decision; ``caller`` (None: the platform itself) must hold the decide
        right over the approval's session (:mod:`ankka.runtime.declare.policy`).

        ``lock_wait``: wait at most that long for the session's turn lock, else raise
        :class:`SessionBusy`, nothing decided (the timers' expiries; a person's decision
        waits for the turn in flight)."""
        if self.index is None:
            raise NotFound(f"there is no approval {approval!r} (this runtime has no index)")
        row = await self.index.get(approval)
        if row is None:
            raise NotFound(f"there is no approval {approval!r}")
        ctx = self._context
        session = row.session
        async with turn_within(ctx.queue, session, lock_wait) as held:
            if not held:
                raise SessionBusy(f"session {session!r} is in a turn; {approval!r} waits")
            folded = await ctx.sessions.load(session)
            if caller is not None:
                ctx.check(session, caller, "decide", folded.opened)
            if session.startswith(TASK_SESSION):
                decided = await self._decide_task(
                    row, folded, decision, given_digest, reason=reason, decided_by=decided_by
                )
            else:
                return await self._decide_turn(
                    row, folded, decision, given_digest, reason=reason, decided_by=decided_by
                )
        if self.task_decided is not None:
            data = {"agent": row.agent, "id": row.id, "decision": decision}
            self.task_decided(
                session.removeprefix(TASK_SESSION),
                {**data, "decided_by": decided_by},
                decided.status == "resumed",
            )
        return decided

    async def _decide_turn(
        self,
        row: IndexRow,
        folded: SessionState,
        decision: Decision,
        given_digest: str | None,
        *,
        reason: str,
        decided_by: str,
    ) -> Decided:
        """A request turn's decision; the last one resumes the turn under the same lock."""
        assert self.index is not None
        approval, session, ctx = row.id, row.session, self._context
        state = folded.approvals
        refuse_decided(approval, state.decided.get(approval))
        current = state.current
        request = current.request(approval) if current is not None else None
        if current is None or request is None:
            if approval not in state.requested:
                # Its suspension was never recorded (a crash between timer and record).
                await self.index.drop([approval])
                raise NotFound(f"there is no approval {approval!r}")
            raise ApprovalConflict(
                f"approval {approval!r} belongs to a turn that has ended; nothing to decide"
            )
        if current.all_decided:  # cut off before: never resumed
            await self._end(session, folded, current, "cut_off", self._cut_off_reason(current))
            raise ApprovalConflict(f"approval {approval!r}: {CUT_OFF}")
        refuse_digest(approval, request, given_digest)
        record = ApprovalDecided(
            approval, current.turn, decision, reason, decided_by, ctx.clock.now()
        )
        await ctx.record(session, folded, (record,))
        if not current.all_decided:
            await self.index.settle([approval], decision)
        # After the last decision its row is written once the turn is settled (off the
        # path from the decision to the approved call's start).
        self._told(row, record, current)
        if not current.all_decided:
            return Decided(record, "recorded", current.undecided)
        return await self._resume(session, folded, current, record)

    def _told(self, row: IndexRow, record: ApprovalDecided, held: Suspension) -> None:
        """A decision was recorded: the notice, and the wait's span when tracing is on (in
        the trace of the turn that asked: ``held`` recorded its context)."""
        request = held.request(row.id)
        data = {"id": row.id, "decision": record.decision, "decided_by": record.decided_by}
        self.notify("approval_decided", {"session": row.session, "agent": row.agent, **data})
        requested = datetime.fromisoformat(row.created_at) if row.created_at else None
        waited = (record.at - requested).total_seconds() if requested else None
        self._context.metrics.work.decided(row.agent, row.tool, record.decision, waited)
        spans = self._context.spans
        if spans is not None and requested is not None:
            call = request.call_id if request is not None else None
            spans.approval_wait(row.id, row.tool, call, requested, record, held.record.trace)

    async def _decide_task(
        self,
        row: IndexRow,
        folded: SessionState,
        decision: Decision,
        given_digest: str | None,
        *,
        reason: str,
        decided_by: str,
    ) -> Decided:
        """A task's request: record the decision in the task's session; after the last one
        the task host is poked and the instance settles the calls before anything else."""
        assert self.index is not None
        held = folded.approvals.holding(row.id)
        if held is None:
            await self.index.drop([row.id])
            raise NotFound(f"there is no approval {row.id!r}")
        refuse_decided(row.id, held.decisions.get(row.id))
        request = held.request(row.id)
        assert request is not None
        refuse_digest(row.id, request, given_digest)
        record = ApprovalDecided(
            row.id, held.turn, decision, reason, decided_by, self._context.clock.now()
        )
        await self._context.record(row.session, folded, (record,))
        last = held.all_decided
        await self.index.settle([row.id], decision, close=last)
        self._told(row, record, held)
        return Decided(record, "resumed" if last else "recorded", held.undecided)

    async def _resume(
        self, session: str, folded: SessionState, current: Suspension, last: ApprovalDecided
    ) -> Decided:
        """Go on with the turn; the turn lock is held."""
        ctx = self._context
        suspended = current.record
        try:
            request = TurnRequest(suspended.agent, session, suspended.message)
            planned = planning.plan(ctx.service, ctx.providers, request)
            settings = ctx.compaction_of(planned.agent, planned.effect.compaction)
            ctx.check_summariser(planned.agent, settings)
        except (NotFound, ConfigurationError) as exc:
            reason = (
                f"agent {suspended.agent!r} cannot be planned again ({exc}); the turn is "
                "ended and none of its calls is run"
            )
            await self._end(session, folded, current, "internal_error", reason)
            raise HandlerGone(reason) from exc
        by_call = {r.call_id: r for r in suspended.requests}
        answer = suspended.messages[-1]
        assert isinstance(answer, AssistantMessage)
        verdicts = Verdicts(
            answer,
            {
                call: Verdict(approval, decided.decision, decided.reason)
                for call, (approval, decided) in current.verdicts.items()
            },
        )

        async def starting(step: RunTool) -> None:
            call, request = step.call, by_call[step.call.id]
            # Never other arguments: the call run is the one whose digest was approved.
            if digest(call.name, call.arguments, call.id, current.position) != request.digest:
                raise HandlerGone(f"approval {request.id!r}: the call no longer matches")
            start = ApprovedCallStarted(request.id, current.turn, call.id, request.digest)
            await ctx.record(session, folded, (start,))

        async def answered(call: ModelCall) -> None:
            # The record only guards against a crash later in the resume; the call is
            # accounted at the turn's end all the same, so a store that refuses it is logged
            # and the turn goes on (failing it would drop both the answer and that account).
            try:
                await ctx.record(session, folded, (ResumedCall(current.turn, call),))
            except Exception as exc:
                log.warning(
                    "could not journal a resumed call of %s (%s); it is accounted at the "
                    "turn's end",
                    planned.agent,
                    type(exc).__name__,
                )

        resumption = Resumption(suspended.messages, verdicts, answered, starting)
        ledger = ctx.executor.ledger(current.calls)
        resumed = ctx.clock.monotonic()
        questions = self.questions
        asker = (
            questions.for_turn(
                session,
                planned.agent,
                current.turn,
                folded.position,
                folded.opened,
                planned.provider,
                ledger,
            )
            if questions is not None
            else None
        )
        try:
            effect, listed = await ctx.turn_tools(planned, current.turn, folded)
            async with asking(asker):  # leaving it closes the questions left unanswered
                outcome = await take_turn(
                    ctx, planned, effect, folded, current.turn, ledger=ledger, resume=resumption
                )
            asked = tuple(asker.records) if asker is not None else ()
            spent = (*asked, *self._judged(ledger, planned.agent, current.turn))
            if isinstance(outcome, TurnSuspension):
                if self.index is not None:
                    await self.index.close_session(session, self._states(current))
                pending = await self.suspend(planned, folded, (*listed.records, *spent), outcome)
                return Decided(last, "awaiting_approval", pending)
            await ctx.record(session, folded, (*listed.records, *outcome.messages, *spent))
        except BaseException as exc:
            asked = tuple(asker.records) if asker is not None else ()
            await self._failed(session, folded, current, planned, ledger, exc, asked)
            raise
        if self.index is not None:
            await self.index.close_session(session, self._states(current))
        offered = {tool.name for tool in effect.tools}
        seconds = ctx.clock.monotonic() - resumed
        ctx.metrics.turn_finished(planned.agent, outcome, seconds, offered=offered)
        if planned.effect.write_memory:
            ctx.committed(session, settings, planned.effect.model)
        return Decided(last, "completed", outcome=outcome)

    def _judged(self, ledger: Ledger, agent: str, turn: str) -> tuple[Record, ...]:
        records = spent_records(ledger, agent, turn)
        if records:
            self._context.metrics.judgment_tokens_used(ledger.judging.usage)
        return records

    async def _failed(
        self,
        session: str,
        folded: SessionState,
        current: Suspension,
        planned: PlannedTurn,
        ledger: Ledger,
        exc: BaseException,
        asked: tuple[Record, ...] = (),
    ) -> None:
        """A resumed turn that failed or was cancelled is ended with what it spent, and with
        ``asked``: its servers' questions (those it closed as it ended among them) and the
        sampling calls it served."""
        ctx, made = self._context, ledger.calls
        if not isinstance(exc, HandlerGone | asyncio.CancelledError):
            reason = (
                f"the resumed turn failed: {exc}"
                if isinstance(exc, AnkkaError)
                else (f"the resumed turn failed unexpectedly ({type(exc).__name__})")
            )
            # What the resumed turn spent is accounted, as for any turn that failed.
            kind = exc.kind if isinstance(exc, AnkkaError) else "internal_error"
            accounted = (*asked, *unwritten(ledger, planned.agent, current.turn, kind))
            with contextlib.suppress(AnkkaError):
                await self._end(session, folded, current, "failed", reason, accounted)
            ctx.metrics.calls_made(planned.agent, made)
        elif isinstance(exc, asyncio.CancelledError):
            # The caller left: the turn cannot go on (every request is decided), so it is
            # ended now with every call it made, best effort; else, cut off later, it is
            # ended with the calls it made before suspending.
            accounted = (*asked, *unwritten(ledger, planned.agent, current.turn, "cancelled"))
            try:
                await self._end(session, folded, current, "cancelled", CANCELLED, accounted)
            except Exception:
                log.warning("a cancelled resumed turn was not ended", exc_info=True)
            else:
                ctx.metrics.calls_made(planned.agent, made)

    async def shown(
        self, rows: Sequence[IndexRow], caller: str | None = None
    ) -> list[dict[str, Any]]:
        """The rows as the API shows them, read from each session's journal (once per
        session); a row whose suspension was never recorded is left out, and so is one of a
        session ``caller`` (None: the platform itself) may not read."""
        states: dict[str, ApprovalState | None] = {}
        out = []
        for row in rows:
            if row.session not in states:
                entries = await self._context.journal.read(row.session)
                opened = opened_by(e.record for e in entries)
                if caller is not None and not self._context.allows(caller, "read", opened):
                    states[row.session] = None
                    continue
                states[row.session] = ApprovalState()
                for entry in entries:
                    states[row.session].add(entry.seq, entry.record)  # type: ignore[union-attr]
            state = states[row.session]
            if state is None:
                continue
            request = state.requested.get(row.id)
            if request is None:
                continue
            decided = state.decided.get(row.id)
            item: dict[str, Any] = {
                **request.shown(),
                "session": row.session,
                "agent": row.agent,
                "state": decided.decision if decided is not None else row.state,
            }
            if decided is not None:
                item["decided_by"] = decided.decided_by
                item["reason"] = decided.reason
            out.append(item)
        return out

    # --- expiry --------------------------------------------------------------------------

    async def expire_due(self) -> int:
        """Decide as the platform every request past its limit; notify those close to it.
        Returns how many expired."""
        if self.index is None:
            return 0
        now = self._context.clock.now()
        due: list[IndexRow] = []
        for row in await self.index.timed(now + timedelta(seconds=self.timers.notice_seconds)):
            if row.expires_at is not None and row.expires_at <= now:
                due.append(row)
            elif not row.noticed:
                await self.index.noticed(row.id)
                self.notify(
                    "approval_expiring",
                    {
                        "session": row.session,
                        "agent": row.agent,
                        "id": row.id,
                        "tool": row.tool,
                        "expires_at": row.expires_at.isoformat() if row.expires_at else None,
                    },
                )
        # Side by side: each expiry may resume its turn (tools, a model call), and one slow
        # turn or one session a turn holds must not keep the others past their limits.
        return sum(await asyncio.gather(*(self._expire(row) for row in due)))

    async def _expire(self, row: IndexRow) -> bool:
        """Decide ``row`` as expired; True when it was (its resumed turn may have failed)."""
        assert self.index is not None
        async with self._expiring:
            try:
                await self.decide(
                    row.id,
                    "expired",
                    None,
                    decided_by=PLATFORM,
                    reason="no one decided in time",
                    lock_wait=LOCK_WAIT,
                )
            except SessionBusy:
                log.info(
                    "approval %s is past its limit but its session %s is in a turn (in "
                    "flight, or in another runtime): expired at a later tick",
                    row.id,
                    row.session,
                )
                return False
            except ApprovalConflict:
                await self.index.settle([row.id], "ended", close=True)
                return False
            except NotFound:
                return False
            except AnkkaError as exc:  # the resumed turn failed: recorded as ended
                log.warning("approval %s expired; its turn failed: %s", row.id, exc)
            return True

    async def recover(self) -> None:
        """At start: end every turn cut off after its last decision, and close the rows of a
        session with no suspended turn. Each session alone: its turn lock is waited for a
        bounded time (:func:`~.recovery.turn_within`; a session a turn holds is left to it,
        as a turn that finds a cut-off turn ends it), and one that fails is logged by its id
        and left as it is (its rows open, so a person may still decide a pending request
        once the store reads it), the others going on."""
        if self.index is None:
            return
        for session in await self.index.open_sessions():
            if session.startswith(TASK_SESSION):
                continue  # a task's instance settles its calls itself when it resumes
            try:
                await self._recover(session)
            except Exception as exc:  # one session stops neither the start nor the others
                log.warning(
                    "the approvals of session %s were not recovered at start (%s): its rows "
                    "are left open, and its next turn or the next start tries again",
                    session,
                    cause(exc),
                )

    async def _recover(self, session: str) -> None:
        ctx, index = self._context, self.index
        assert index is not None
        async with turn_within(ctx.queue, session) as held:
            if not held:
                log.info(
                    "the approvals of session %s: its turn lock is held (a turn in flight, "
                    "in another runtime), so they are left to that turn",
                    session,
                )
                return
            folded = await ctx.sessions.load(session)
            current = folded.approvals.current
            if current is None:
                await index.close_session(session)
            elif current.all_decided:
                await self._end(session, folded, current, "cut_off", self._cut_off_reason(current))

    async def _count_pending(self) -> None:
        if self.index is not None:
            self._context.metrics.work.pending(await self.index.pending_count())

    async def _timers(self) -> None:
        """The durable timers' clock: a runtime that was down at an expiry decides it on its
        first tick, right after it starts."""
        while True:
            try:
                await self.expire_due()
                await self._count_pending()
            except AnkkaError as exc:
                log.warning("approval timers: %s", exc)
            await asyncio.sleep(self.timers.tick_seconds)

    async def __aenter__(self) -> ApprovalDesk:
        if self.index is not None:
            await self.index.create()
            if self.questions is not None:  # before recover() ends their rows unsaid
                await self.questions.recover()
            await self.recover()
            self._timer = asyncio.create_task(self._timers(), name="ankka-approval-timers")
        return self

    async def __aexit__(self, *exc: object) -> None:
        task, self._timer = self._timer, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def need_index(
    index: ApprovalIndex | None, agent: str, waiting: Sequence[ToolCall]
) -> ApprovalIndex:
    """The approval index, or a configuration error naming the tools that need one."""
    if index is None:
        names = ", ".join(sorted({c.name for c in waiting}))
        raise ConfigurationError(
            f"agent {agent!r}: tool(s) {names} require approval and this runtime has no "
            "approval index (ankka serve opens one beside the journal)"
        )
    return index
