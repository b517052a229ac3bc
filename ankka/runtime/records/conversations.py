"""A moderated conversation's own journal records (docs/teams.md). Pure.

What the speakers said is the session's messages (a user message, then each speaker's
answer as an assistant message naming its agent). Besides them, a conversation records each
turn the moderator gave that produced nothing (:class:`TurnSkipped`: who, and why) and its end
(:class:`ConversationEnded`: the typed reason and a sentence a person can read), and, when a
run is cut off for a reason known then (its stream's caller left, its stream's deadline
passed, or the server's shutdown cut it), why
(:class:`ConversationCutOff`; :class:`ConversationResumed` when the same message goes on with
it, so a later cut that nobody recorded is not told as that one). None is part of the
conversation's fold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "CALLER_LEFT",
    "CUT_BY",
    "SHUTTING_DOWN",
    "STREAM_DEADLINE_EXCEEDED",
    "ConversationCutOff",
    "ConversationEnded",
    "ConversationResumed",
    "TurnSkipped",
]


@dataclass(frozen=True, slots=True)
class TurnSkipped:
    """A turn given to ``speaker`` that produced nothing: ``reason`` is ``speaker_silent``,
    ``speaker_failed`` or ``unknown_speaker``; ``detail`` says what happened."""

    kind: ClassVar[str] = "turn_skipped"

    turn: str
    speaker: str
    reason: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "speaker": self.speaker,
            "reason": self.reason,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TurnSkipped:
        turn, speaker = str(data["turn"]), str(data["speaker"])
        return cls(turn, speaker, str(data["reason"]), str(data["detail"]))


@dataclass(frozen=True, slots=True)
class ConversationEnded:
    """How a run of the conversation (one message's) ended."""

    kind: ClassVar[str] = "conversation_ended"

    turn: str
    reason: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "reason": self.reason, "detail": self.detail}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConversationEnded:
        return cls(str(data["turn"]), str(data["reason"]), str(data["detail"]))


CALLER_LEFT = "caller_left"
"""A :class:`ConversationCutOff`'s ``cause``: the stream's caller left mid-run."""

STREAM_DEADLINE_EXCEEDED = "stream_deadline_exceeded"
"""A :class:`ConversationCutOff`'s ``cause``: the run outlived its stream's bound (the
conversation's deadline and the stream's grace), and the stream, ending with that error,
cut it."""

SHUTTING_DOWN = "shutting_down"
"""A :class:`ConversationCutOff`'s ``cause``: the server's shutdown (its drain) cut the run's
request, answering it with that error."""

CUT_BY = {
    CALLER_LEFT: "its stream's caller left",
    STREAM_DEADLINE_EXCEEDED: "its stream's deadline passed",
    SHUTTING_DOWN: "the server shut down",
}
"""Each cause, as a person reads it (the ``interrupted`` end's detail, the console)."""


@dataclass(frozen=True, slots=True)
class ConversationCutOff:
    """A run (one message's) cut off, and why, recorded when that is known as it happens:
    ``cause`` is :data:`CALLER_LEFT`, :data:`STREAM_DEADLINE_EXCEEDED` or
    :data:`SHUTTING_DOWN`. A process killed records none."""

    kind: ClassVar[str] = "conversation_cut_off"

    turn: str
    cause: str

    def as_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "cause": self.cause}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConversationCutOff:
        return cls(str(data["turn"]), str(data["cause"]))


@dataclass(frozen=True, slots=True)
class ConversationResumed:
    """A run cut off with a recorded cause, gone on with (the same message sent again)."""

    kind: ClassVar[str] = "conversation_resumed"

    turn: str

    def as_dict(self) -> dict[str, Any]:
        return {"turn": self.turn}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConversationResumed:
        return cls(str(data["turn"]))
