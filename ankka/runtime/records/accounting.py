"""Every model call is accounted for, including those of turns that wrote no messages.

A turn that is written carries its calls on its answers (``AssistantMessage.call``) and its
sum on the last one (``turn_usage``). A turn that spent tokens and wrote nothing (a typed
answer that did not decode, an output guardrail's refusal, a tool-round overrun, a model that
failed on a later call, or a ``write_memory=False`` turn) leaves an :class:`UnwrittenCalls`
record in the session's journal instead: an accounting event, not a message, so the
conversation (the fold) is unchanged while the session can still be audited and its cost in
tokens explained. :func:`session_usage` sums both kinds, kept apart.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ankka.runtime.records.iterations import IterationCompleted, iteration_of
from ankka.runtime.records.mcp import SampledCall
from ankka.runtime.records.messages import AssistantMessage, ModelCall, Usage

__all__ = ["NOT_WRITTEN", "SessionUsage", "UnwrittenCalls", "session_usage"]

NOT_WRITTEN = "not_written"  # the reason of a write_memory=False turn


@dataclass(frozen=True, slots=True)
class UnwrittenCalls:
    """The model calls of one turn whose messages were not written, and why not.

    ``reason`` is the failure's kind (``turn_failed``, ``refused``, ``model_unavailable``,
    ...) or :data:`NOT_WRITTEN`.
    """

    kind: ClassVar[str] = "unwritten_calls"

    turn: str
    agent: str
    reason: str
    calls: tuple[ModelCall, ...]

    @property
    def usage(self) -> Usage:
        total = Usage()
        for call in self.calls:
            total = total + call.usage
        return total

    def as_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "agent": self.agent,
            "reason": self.reason,
            "calls": [c.as_dict() for c in self.calls],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> UnwrittenCalls:
        return cls(
            str(data["turn"]),
            str(data["agent"]),
            str(data["reason"]),
            tuple(ModelCall.from_dict(c) for c in data["calls"]),
        )


@dataclass(frozen=True, slots=True)
class SessionUsage:
    """A session's tokens: of the turns written, and of the calls of turns that were not."""

    turns: int = 0
    written: Usage = field(default_factory=Usage)
    unwritten_turns: int = 0
    unwritten: Usage = field(default_factory=Usage)

    @property
    def total(self) -> Usage:
        return self.written + self.unwritten


def session_usage(records: Iterable[object]) -> SessionUsage:
    """Sum a session's records (in journal order) into its :class:`SessionUsage`. A request
    turn's tokens are on its last answer; a task's iterations (session ``task:<id>``) count
    one turn each, with the usage of its mark (or, recorded before the marks, its answer's
    call)."""
    turns, written, unwritten_turns, unwritten = 0, Usage(), 0, Usage()
    iterations: dict[int, Usage] = {}
    for record in records:
        if isinstance(record, AssistantMessage) and record.turn_usage is not None:
            turns += 1
            written = written + record.turn_usage
        elif isinstance(record, AssistantMessage) and record.call is not None:
            number = iteration_of(record.turn)
            if number is not None:
                iterations.setdefault(number, record.call.usage)
        elif isinstance(record, IterationCompleted):
            iterations[record.number] = record.usage
        elif isinstance(record, UnwrittenCalls):
            unwritten_turns += 1
            unwritten = unwritten + record.usage
        elif isinstance(record, SampledCall) and iteration_of(record.turn) is not None:
            written = written + record.call.usage  # a task's (a request turn's are its own)
    for usage in iterations.values():
        turns += 1
        written = written + usage
    return SessionUsage(turns, written, unwritten_turns, unwritten)
