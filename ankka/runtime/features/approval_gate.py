"""Approvals in an autonomous agent's task: the gate before a response's calls run.

A task's records are its journal session ``task:<id>``. When the last response asks for calls
that need a decision, the gate records their requests (index rows first, then one
``turn_suspended`` record naming the response's turn) and the task waits, in state
``awaiting-approval``: its instance makes no model call and starts no other task. Once every
request is decided, the calls of that response are settled before anything else, in order: an
approved call's start is appended before it runs (a start already recorded means a run was cut
off: it is never run again), refused and expired calls are answered as the request agent's are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ankka.runtime.declare.tools import ApprovalRule
from ankka.runtime.engine.loop import Verdict
from ankka.runtime.records.approvals import (
    ApprovalDecided,
    ApprovalRequest,
    ApprovedCallStarted,
    TurnSuspended,
    requests_for,
)
from ankka.runtime.records.messages import ToolCall
from ankka.runtime.records.registry import Entry
from ankka.runtime.store.approval_index import ApprovalIndex
from ankka.runtime.store.journal import Journal

__all__ = ["CUT_OFF_RUN", "Gate", "TaskSuspension", "gate", "suspension_holding"]

CUT_OFF_RUN = (
    "this approved call's run was cut off (the runtime stopped after its start was recorded); "
    "it is not run again"
)


@dataclass(slots=True)
class TaskSuspension:
    """A response's requests in a task session, their decisions and the calls started."""

    position: int
    record: TurnSuspended
    decisions: dict[str, ApprovalDecided] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)

    @property
    def undecided(self) -> tuple[ApprovalRequest, ...]:
        return tuple(r for r in self.record.requests if r.id not in self.decisions)


def _suspensions(entries: Sequence[Entry]) -> dict[str, TaskSuspension]:
    """Every suspension of the session by turn (the last one of a turn wins)."""
    found: dict[str, TaskSuspension] = {}
    by_approval: dict[str, TaskSuspension] = {}
    for entry in entries:
        record = entry.record
        if isinstance(record, TurnSuspended):
            held = found[record.turn] = TaskSuspension(entry.seq, record)
            for r in record.requests:
                by_approval[r.id] = held
        elif isinstance(record, ApprovalDecided) and record.approval in by_approval:
            by_approval[record.approval].decisions[record.approval] = record
        elif isinstance(record, ApprovedCallStarted) and record.approval in by_approval:
            by_approval[record.approval].started.add(record.call_id)
    return found


def suspension_holding(entries: Sequence[Entry], approval: str) -> TaskSuspension | None:
    for held in _suspensions(entries).values():
        if any(r.id == approval for r in held.record.requests):
            return held
    return None


@dataclass(frozen=True, slots=True)
class Gate:
    """``waiting`` (with the requests, ``new`` when this call recorded them), or the verdict
    of every gated call and the calls whose start was already recorded."""

    waiting: bool
    position: int
    requests: tuple[ApprovalRequest, ...] = ()
    new: bool = False
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    started: frozenset[str] = frozenset()
    digests: dict[str, str] = field(default_factory=dict)
    turn: str = ""

    def start_record(self, call: ToolCall) -> ApprovedCallStarted:
        verdict = self.verdicts[call.id]
        return ApprovedCallStarted(verdict.approval, self.turn, call.id, self.digests[call.id])


async def gate(
    journal: Journal,
    index: ApprovalIndex | None,
    *,
    session: str,
    agent: str,
    turn: str,
    calls: Sequence[ToolCall],
    rule_of: Callable[[ToolCall], ApprovalRule | None],
    needs: Callable[[ToolCall], bool],
    now: datetime,
) -> Gate | None:
    """None when no call of the response needs a decision; else where the gate stands."""
    gated = [c for c in calls if needs(c)]
    if not gated:
        return None
    entries = await journal.read(session)
    position = entries[-1].seq if entries else 0
    held = _suspensions(entries).get(turn)
    if held is None:
        if index is None:
            raise RuntimeError("a task tool requires approval and the runtime has no index")

        def timeout_of(call: ToolCall) -> float | None:
            rule = rule_of(call)
            return rule.timeout if rule is not None else None

        requests = requests_for(gated, timeout_of, position=position + 1, now=now)
        await index.schedule(session, agent, [(r.id, r.tool, r.expires_at) for r in requests], now)
        record = TurnSuspended(turn, agent, "", (), tuple(requests))
        position = await journal.append(session, [record], expected=position)
        return Gate(True, position, requests, new=True, turn=turn)
    if held.undecided:
        return Gate(True, position, held.undecided, turn=turn)
    verdicts = {
        r.call_id: Verdict(r.id, held.decisions[r.id].decision, held.decisions[r.id].reason)
        for r in held.record.requests
    }
    digests = {r.call_id: r.digest for r in held.record.requests}
    return Gate(
        False,
        position,
        verdicts=verdicts,
        started=frozenset(held.started),
        digests=digests,
        turn=turn,
    )
