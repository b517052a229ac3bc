"""A session's approvals as its journal says: the fold of the approval records. Pure.

At most one turn of a session is suspended at a time (a new turn is refused while one is):
:attr:`ApprovalState.current`. Every decision the session ever recorded stays findable by
approval id, so a second decision is answered with the first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ankka.runtime.records.approvals import (
    ApprovalDecided,
    ApprovalRequest,
    ApprovedCallStarted,
    ResumedCall,
    TurnEnded,
    TurnSuspended,
)
from ankka.runtime.records.messages import AssistantMessage, ModelCall, ToolResult, UserMessage

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

    def request(self, approval: str) -> ApprovalRequest | None:
        return next((r for r in self.record.requests if r.id == approval), None)


@dataclass(slots=True)
class ApprovalState:
    current: Suspension | None = None
    decided: dict[str, ApprovalDecided] = field(default_factory=dict)
    requested: dict[str, ApprovalRequest] = field(default_factory=dict)

    def add(self, seq: int, record: object) -> None:
        current = self.current
        if isinstance(record, TurnSuspended):
            self.current = Suspension(seq, record)
            for r in record.requests:
                self.requested[r.id] = r
        elif isinstance(record, ApprovalDecided):
            self.decided[record.approval] = record
            if current is not None and record.turn == current.turn:
                current.decisions[record.approval] = record
        elif isinstance(record, ApprovedCallStarted):
            if current is not None and record.turn == current.turn:
                current.started.add(record.approval)
        elif isinstance(record, ResumedCall):
            if current is not None and record.turn == current.turn:
                current.resumed.append(record.call)
        elif isinstance(record, TurnEnded):
            if current is not None and record.turn == current.turn:
                self.current = None
        elif (
            isinstance(record, UserMessage | AssistantMessage | ToolResult)
            and current is not None
            and record.turn == current.turn
        ):
            # The resumed turn's messages are committed: it is no longer suspended.
            self.current = None
