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
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ankka._kernel.errors import AnkkaError, ConfigurationError, NotFound
from ankka.runtime.declare.judgments.guardrail import Judging
from ankka.runtime.declare.tools import approval_of
from ankka.runtime.drivers.approval_errors import (
    ApprovalConflict,
    HandlerGone,
    refuse_decided,
    refuse_digest,
)
from ankka.runtime.drivers.resumed import RecordingProvider
from ankka.runtime.engine.approval_state import ApprovalState, Suspension
from ankka.runtime.engine.loop import Resume, TurnOutcome, TurnSuspension, Verdict, run_turn
from ankka.runtime.features.approval_gate import suspension_holding
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
from ankka.runtime.records.messages import ModelCall, ToolCall
from ankka.runtime.records.registry import Record
from ankka.runtime.records.session import opened_by
from ankka.runtime.store.approval_index import ApprovalIndex, IndexRow

if TYPE_CHECKING:
    from ankka.runtime.drivers.request import Runtime
    from ankka.runtime.engine.planning import PlannedTurn
    from ankka.runtime.engine.session import SessionState

__all__ = ["ApprovalDesk", "Decided"]

log = logging.getLogger("ankka.approvals")

PLATFORM = "platform"
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
class Decided:
    """What a decision led to: ``recorded`` (others still wait), ``completed`` (the turn
    resumed and finished: ``outcome``), ``awaiting_approval`` (it resumed and waits again),
    or ``ended``."""

    decision: ApprovalDecided
    status: str
    pending: tuple[ApprovalRequest, ...] = ()
    outcome: TurnOutcome | None = None
    reason: str = ""


def _log_notice(event: str, data: dict[str, Any]) -> None:
    log.info("%s %s", event, data)


class ApprovalDesk:
    def __init__(
        self,
        runtime: Runtime,
        index: ApprovalIndex | None,
        *,
        notice_seconds: float = 300.0,
        tick_seconds: float = 1.0,
        notify: Notify | None = None,
    ) -> None:
        self._runtime = runtime
        self.index = index
        self.notice_seconds = notice_seconds
        self.tick_seconds = tick_seconds
        self.notify: Notify = notify or _log_notice
        # Told of a task's decision (task id, the event's data, whether it was the last).
        self.task_decided: Callable[[str, dict[str, Any], bool], None] | None = None
        self._timer: asyncio.Task[None] | None = None

    # --- suspending ----------------------------------------------------------------------

    async def suspend(
        self,
        planned: PlannedTurn,
        folded: SessionState,
        listings: Sequence[Record],
        suspension: TurnSuspension,
    ) -> tuple[ApprovalRequest, ...]:
        """Record the suspended turn (timers first, then one journal append)."""
        index = self._need_index(planned.agent, suspension.waiting)
        rt = self._runtime
        now = rt.clock.now()
        position = folded.position + len(listings) + 1  # where TurnSuspended will be
        tools = {t.name: t for t in planned.effect.tools}

        def timeout_of(call: ToolCall) -> float | None:
            rule = approval_of(tools.get(call.name))
            return rule.timeout if rule is not None else None

        requests = requests_for(suspension.waiting, timeout_of, position=position, now=now)
        record = TurnSuspended(
            suspension.turn,
            planned.agent,
            planned.message,
            suspension.messages,
            tuple(requests),
        )
        await index.schedule(
            planned.session, planned.agent, [(r.id, r.tool, r.expires_at) for r in requests], now
        )
        try:
            await rt.record(planned.session, folded, (*listings, record))
        except BaseException:
            with contextlib.suppress(AnkkaError):
                await index.drop([r.id for r in requests])
            raise
        for r in requests:
            self.notify(
                "approval_requested",
                {"session": planned.session, "agent": planned.agent, **r.shown()},
            )
        return tuple(requests)

    def _need_index(self, agent: str, waiting: Sequence[ToolCall]) -> ApprovalIndex:
        if self.index is None:
            names = ", ".join(sorted({c.name for c in waiting}))
            raise ConfigurationError(
                f"agent {agent!r}: tool(s) {names} require approval and this runtime has no "
                "approval index (ankka serve opens one beside the journal)"
            )
        return self.index

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
        await self._runtime.record(session, folded, (*spent, ended))
        self._runtime.metrics.calls_made(current.record.agent, made)
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
    ) -> Decided:
        """Record a decision; ``caller`` (None: the platform itself) must hold the decide
        right over the approval's session (:mod:`ankka.runtime.declare.policy`)."""
        if self.index is None:
            raise NotFound(f"there is no approval {approval!r} (this runtime has no index)")
        row = await self.index.get(approval)
        if row is None:
            raise NotFound(f"there is no approval {approval!r}")
        rt = self._runtime
        session = row.session
        if caller is not None:
            rt.check(session, caller, "decide", await rt.opener(session))
        if session.startswith(TASK_SESSION):
            return await self._decide_task(
                row, decision, given_digest, reason=reason, decided_by=decided_by
            )
        async with rt.queue.turn(session):
            folded = await rt.load(session)
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
                approval, current.turn, decision, reason, decided_by, rt.clock.now()
            )
            await rt.record(session, folded, (record,))
            if not current.all_decided:
                await self.index.settle([approval], decision)
            # After the last decision its row is written once the turn is settled (off the
            # path from the decision to the approved call's start).
            self.notify(
                "approval_decided",
                {
                    "session": session,
                    "agent": current.record.agent,
                    "id": approval,
                    "decision": decision,
                    "decided_by": decided_by,
                },
            )
            if not current.all_decided:
                return Decided(record, "recorded", current.undecided)
            return await self._resume(session, folded, current, record)

    async def _decide_task(
        self,
        row: IndexRow,
        decision: Decision,
        given_digest: str | None,
        *,
        reason: str,
        decided_by: str,
    ) -> Decided:
        """A task's request: record the decision in the task's session; after the last one
        the task host is poked and the instance settles the calls before anything else."""
        rt = self._runtime
        assert self.index is not None
        async with rt.queue.turn(row.session):
            entries = await rt.journal.read(row.session)
            held = suspension_holding(entries, row.id)
            if held is None:
                await self.index.drop([row.id])
                raise NotFound(f"there is no approval {row.id!r}")
            refuse_decided(row.id, held.decisions.get(row.id))
            request = next(r for r in held.record.requests if r.id == row.id)
            refuse_digest(row.id, request, given_digest)
            record = ApprovalDecided(
                row.id, held.record.turn, decision, reason, decided_by, rt.clock.now()
            )
            position = entries[-1].seq if entries else 0
            await rt.journal.append(row.session, [record], expected=position)
            held.decisions[row.id] = record
            last = not held.undecided
            await self.index.settle([row.id], decision, close=last)
        data = {
            "agent": row.agent,
            "id": row.id,
            "decision": decision,
            "decided_by": decided_by,
        }
        self.notify("approval_decided", {"session": row.session, **data})
        if self.task_decided is not None:
            self.task_decided(row.session.removeprefix(TASK_SESSION), data, last)
        return Decided(record, "resumed" if last else "recorded", held.undecided)

    async def _resume(
        self, session: str, folded: SessionState, current: Suspension, last: ApprovalDecided
    ) -> Decided:
        """Go on with the turn; the turn lock is held."""
        rt = self._runtime
        suspended = current.record
        try:
            planned = rt.plan(suspended.agent, session, suspended.message)
        except (NotFound, ConfigurationError) as exc:
            reason = (
                f"agent {suspended.agent!r} cannot be planned again ({exc}); the turn is "
                "ended and none of its calls is run"
            )
            await self._end(session, folded, current, "internal_error", reason)
            raise HandlerGone(reason) from exc
        by_call = {r.call_id: r for r in suspended.requests}
        verdicts = {
            r.call_id: Verdict(
                r.id, current.decisions[r.id].decision, current.decisions[r.id].reason
            )
            for r in suspended.requests
        }

        async def start(call: ToolCall, verdict: Verdict) -> None:
            request = by_call[call.id]
            # Never other arguments: the call run is the one whose digest was approved.
            if digest(call.name, call.arguments, call.id, current.position) != request.digest:
                raise HandlerGone(f"approval {request.id!r}: the call no longer matches")
            await rt.record(
                session,
                folded,
                (ApprovedCallStarted(request.id, current.turn, call.id, request.digest),),
            )

        async def journaled(call: ModelCall) -> None:
            await rt.record(session, folded, (ResumedCall(current.turn, call),))

        model = RecordingProvider(planned.provider, planned.agent, journaled, rt.clock)
        made: list[ModelCall] = []
        judging = Judging(rt.judges)
        resumed = rt.clock.monotonic()
        try:
            effect, listings = await rt.with_mcp_tools(planned, current.turn, folded)
            outcome = await run_turn(
                effect,
                history=folded.view.messages,
                agent=planned.agent,
                turn_id=current.turn,
                provider=model,
                clock=rt.clock,
                resume=Resume(suspended.messages, verdicts, start),
                judging=judging,
                spent=made,
            )
            spent = rt.spent(planned, current.turn, judging)
            if isinstance(outcome, TurnSuspension):
                if self.index is not None:
                    await self.index.close_session(session, self._states(current))
                pending = await self.suspend(planned, folded, (*listings, *spent), outcome)
                return Decided(last, "awaiting_approval", pending)
            await rt.record(session, folded, (*listings, *outcome.messages, *spent))
        except BaseException as exc:
            if not isinstance(exc, HandlerGone | asyncio.CancelledError):
                reason = (
                    f"the resumed turn failed: {exc}"
                    if isinstance(exc, AnkkaError)
                    else (f"the resumed turn failed unexpectedly ({type(exc).__name__})")
                )
                # What the resumed turn spent is accounted, as for any turn that failed.
                kind = exc.kind if isinstance(exc, AnkkaError) else "internal_error"
                accounted = rt.unwritten(planned, current.turn, kind, made, judging)
                with contextlib.suppress(AnkkaError):
                    await self._end(session, folded, current, "failed", reason, accounted)
                rt.metrics.calls_made(planned.agent, made)
            elif isinstance(exc, asyncio.CancelledError):
                # The caller left: the turn cannot go on (every request is decided), so it is
                # ended now with every call it made, best effort; else, cut off later, it is
                # ended with the calls it made before suspending.
                accounted = rt.unwritten(planned, current.turn, "cancelled", made, judging)
                try:
                    await self._end(session, folded, current, "cancelled", CANCELLED, accounted)
                except Exception:
                    log.warning("a cancelled resumed turn was not ended", exc_info=True)
                else:
                    rt.metrics.calls_made(planned.agent, made)
            raise
        if self.index is not None:
            await self.index.close_session(session, self._states(current))
        rt.metrics.turn_finished(planned.agent, outcome, rt.clock.monotonic() - resumed)
        rt.committed(planned)
        return Decided(last, "completed", outcome=outcome)

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
                entries = await self._runtime.journal.read(row.session)
                opened = opened_by(e.record for e in entries)
                if caller is not None and not self._runtime.allows(caller, "read", opened):
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
        now = self._runtime.clock.now()
        expired = 0
        for row in await self.index.timed(now + timedelta(seconds=self.notice_seconds)):
            if row.expires_at is not None and row.expires_at <= now:
                try:
                    await self.decide(
                        row.id,
                        "expired",
                        None,
                        decided_by=PLATFORM,
                        reason="no one decided in time",
                    )
                    expired += 1
                except ApprovalConflict:
                    await self.index.settle([row.id], "ended", close=True)
                except NotFound:
                    pass
                except AnkkaError as exc:  # the resumed turn failed: recorded as ended
                    log.warning("approval %s expired; its turn failed: %s", row.id, exc)
                    expired += 1
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
        return expired

    async def recover(self) -> None:
        """At start: end every turn cut off after its last decision."""
        if self.index is None:
            return
        rt = self._runtime
        for session in await self.index.open_sessions():
            if session.startswith(TASK_SESSION):
                continue  # a task's instance settles its calls itself when it resumes
            async with rt.queue.turn(session):
                folded = await rt.load(session)
                current = folded.approvals.current
                if current is None:
                    await self.index.close_session(session)
                elif current.all_decided:
                    await self._end(
                        session, folded, current, "cut_off", self._cut_off_reason(current)
                    )

    async def _timers(self) -> None:
        """The durable timers' clock: a runtime that was down at an expiry decides it on its
        first tick, right after it starts."""
        while True:
            try:
                await self.expire_due()
            except AnkkaError as exc:
                log.warning("approval timers: %s", exc)
            await asyncio.sleep(self.tick_seconds)

    async def __aenter__(self) -> ApprovalDesk:
        if self.index is not None:
            await self.index.create()
            await self.recover()
            self._timer = asyncio.create_task(self._timers(), name="ankka-approval-timers")
        return self

    async def __aexit__(self, *exc: object) -> None:
        task, self._timer = self._timer, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
