"""A session's approvals as its journal says: the fold of the approval records. Pure.

At most one turn of a request session is suspended at a time (a new turn is refused while
one is): :attr:`ApprovalState.current`. Every decision the session ever recorded stays
findable by approval id, so a second decision is answered with the first. A task's session
records a suspension per iteration whose answer waits; :meth:`ApprovalState.of_turn` keeps
the last one of each turn with its decisions and started calls, which is what the task's
next step is planned from once every request is decided.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ankka.runtime.records.approvals import (
    ApprovalDecided,
    ApprovalRequest,
    ApprovedCallStarted,
    ElicitationAnswered,
    ResumedCall,
    TurnEnded,
    TurnSuspended,
)
from ankka.runtime.records.messages import RECORDED_MESSAGES, AssistantMessage, ModelCall

__all__ = ["ApprovalState", "Suspension"]


@dataclass(slots=True)
class Suspension:
    """The suspended turn: where it was recorded, what is decided, which calls started, and
    the model calls a resume of it recorded (:class:`~.records.ResumedCall`)."""

    position: int
    record: TurnSuspended
    decisions: dict[str, ApprovalDecided] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    resumed: list[ModelCall] = field(default_factory=list)

    @property
    def turn(self) -> str:
        return self.record.turn

    @property
    def undecided(self) -> tuple[ApprovalRequest, ...]:
        return tuple(r for r in self.record.requests if r.id not in self.decisions)

    @property
    def all_decided(self) -> bool:
        return not self.undecided

    @property
    def calls(self) -> tuple[ModelCall, ...]:
        """The model calls the turn made before it was suspended (on its recorded answers)."""
        return tuple(
            m.call
            for m in self.record.messages
            if isinstance(m, AssistantMessage) and m.call is not None
        )

    @property
    def all_calls(self) -> tuple[ModelCall, ...]:
        """Every call the turn is known to have made: before its suspension and, recorded
        as they returned, after its resume (what a cut-off turn is accounted with)."""
        return (*self.calls, *self.resumed)

    @property
    def verdicts(self) -> dict[str, tuple[str, ApprovalDecided]]:
        """By call id: the approval and its decision, for every decided request."""
        return {
            r.call_id: (r.id, self.decisions[r.id])
            for r in self.record.requests
            if r.id in self.decisions
        }

    @property
    def started_calls(self) -> frozenset[str]:
        """The call ids of the approved calls whose start was recorded."""
        return frozenset(r.call_id for r in self.record.requests if r.id in self.started)

    def request(self, approval: str) -> ApprovalRequest | None:
        return next((r for r in self.record.requests if r.id == approval), None)


@dataclass(slots=True)
class ApprovalState:
    current: Suspension | None = None
    decided: dict[str, ApprovalDecided] = field(default_factory=dict)
    requested: dict[str, ApprovalRequest] = field(default_factory=dict)
    turns: dict[str, Suspension] = field(default_factory=dict)
    held: dict[str, Suspension] = field(default_factory=dict)  # by approval id

    def of_turn(self, turn: str) -> Suspension | None:
        """The last suspension recorded for ``turn`` (a task's iteration), if any."""
        return self.turns.get(turn)

    def holding(self, approval: str) -> Suspension | None:
        """The suspension that requested ``approval``, if the session recorded it."""
        return self.held.get(approval)

    def add(self, seq: int, record: object) -> None:
        current = self.current
        if isinstance(record, RECORDED_MESSAGES):  # the commonest record, tested first
            if current is not None and record.turn == current.turn:
                # The resumed turn's messages are committed: it is no longer suspended.
                self.current = None
        elif isinstance(record, TurnSuspended):
            self.current = self.turns[record.turn] = Suspension(seq, record)
            for r in record.requests:
                self.requested[r.id] = r
                self.held[r.id] = self.current
        elif isinstance(record, ApprovalDecided):
            self.decided[record.approval] = record
            held = self.held.get(record.approval)
            if held is not None:
                held.decisions[record.approval] = record
        elif isinstance(record, ElicitationAnswered):
            self.requested[record.request.id] = record.request
            self.decided[record.request.id] = record.decided
        elif isinstance(record, ApprovedCallStarted):
            held = self.held.get(record.approval)
            if held is not None:
                held.started.add(record.approval)
        elif isinstance(record, ResumedCall):
            if current is not None and record.turn == current.turn:
                current.resumed.append(record.call)
        elif isinstance(record, TurnEnded) and current is not None and record.turn == current.turn:
            self.current = None
