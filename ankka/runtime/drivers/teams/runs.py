"""A conversation's run as its journal records it, for going on with one cut off. Pure.

A run is one message's: the message (a user message whose turn id names the run), then, each
turn, a spoken answer (an assistant message calling no tool) or a ``turn_skipped`` record,
and last its ``conversation_ended`` record. A speaker's answers asking for tools and their
results come before the answer that ends its turn. A run with no end was cut off (its
process stopped, or its stream's caller left): :func:`recorded_run` reads where it stood, so
the next try goes on from there (:mod:`.conversation`) and no recorded speaker's call is made
again (a model moderator's choice is not recorded: it is asked again). A run whose last record
is a skip may have been ending by it (``closing``): its policy says. Why it was cut off is
known only when recorded as it happened (``cut_by``: its stream's caller left); a killed
process records none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ankka.runtime.declare.teams import Spoken
from ankka.runtime.records.accounting import UnwrittenCalls
from ankka.runtime.records.conversations import (
    ConversationCutOff,
    ConversationEnded,
    ConversationResumed,
    TurnSkipped,
)
from ankka.runtime.records.messages import AssistantMessage, Message, ToolResult, Usage
from ankka.runtime.records.registry import Entry

__all__ = ["RecordedRun", "recorded_run", "spoken"]


def spoken(message: Message) -> bool:
    """Whether ``message`` is a turn of the transcript: a user's, or an answer calling no
    tool (an answer asking for tools, and a tool's result, are its speaker's work)."""
    if isinstance(message, AssistantMessage):
        return not message.tool_calls
    return not isinstance(message, ToolResult)


@dataclass(frozen=True, slots=True)
class RecordedRun:
    """Where a run stood: what was said and skipped, in order; ``last``: the speaker of the
    last turn; ``pending``: the answers asking for tools and results of a turn it was in the
    middle of, and whose (``pending_speaker``); ``usage``: what its recorded calls spent;
    ``closing``: the skip recorded last, when nothing of the run followed it (the run may have
    been ending by it: its policy says, :mod:`.conversation`); ``cut_by``: the cause of the
    cut recorded last (a ``conversation_cut_off``), when nothing of the run followed it."""

    said: tuple[Spoken, ...]
    skipped: tuple[TurnSkipped, ...]
    last: str | None
    pending: tuple[Message, ...]
    pending_speaker: str | None
    usage: Usage
    ended: bool
    closing: TurnSkipped | None = None
    cut_by: str | None = None

    @property
    def turns(self) -> int:
        """The turns the moderator gave that have ended (spoken or skipped)."""
        return len(self.said) + len(self.skipped)


def recorded_run(entries: Sequence[Entry], turn: str, speakers: Sequence[str]) -> RecordedRun:
    """The run ``turn`` as ``entries`` (the session's records after its message) hold it."""
    said: list[Spoken] = []
    skipped: list[TurnSkipped] = []
    pending: list[Message] = []
    last: str | None = None
    usage = Usage()
    ended = False
    closing: TurnSkipped | None = None
    cut_by: str | None = None
    for entry in entries:
        record = entry.record
        if getattr(record, "turn", None) != turn:
            continue
        cut_by = record.cause if isinstance(record, ConversationCutOff) else None
        if not isinstance(record, ConversationEnded | ConversationCutOff | ConversationResumed):
            closing = record if isinstance(record, TurnSkipped) else None
        if isinstance(record, AssistantMessage):
            if record.call is not None:
                usage = usage + record.call.usage
            if record.tool_calls:
                pending.append(record)
                continue
            said.append(Spoken(record.agent, record.content or ""))
            last, pending = record.agent, []
        elif isinstance(record, ToolResult):
            pending.append(record)
        elif isinstance(record, UnwrittenCalls):
            for call in record.calls:
                usage = usage + call.usage
        elif isinstance(record, TurnSkipped):
            skipped.append(record)
            last = record.speaker if record.speaker in speakers else last
            pending = []
        elif isinstance(record, ConversationEnded):
            ended = True
    speaker = pending[0].agent if pending else None
    return RecordedRun(
        tuple(said), tuple(skipped), last, tuple(pending), speaker, usage, ended, closing, cut_by
    )
