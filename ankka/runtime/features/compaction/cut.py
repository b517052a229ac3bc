"""Where a compaction cuts: pure.

The summary replaces the oldest messages up to a cut; everything after it stays verbatim.
A cut is only ever at the start of a turn, so a tool call is never separated from its result
and no turn is split, and at least ``keep_messages`` messages stay after it. A request turn
starts with its user message; a task's iteration (a task's session has no user messages: the
task is shown apart) starts with its answer, the first message of a new turn.
One summarisation reads at most ``max_replaced_chars``, oldest turns first, and is not
made for less than ``min_new_chars`` of new messages (when the verbatim part alone is over the
start, that batches the calls instead of making one per turn).
"""

from __future__ import annotations

from dataclasses import dataclass

from ankka.runtime.declare.compaction import Compaction
from ankka.runtime.engine.view import SentView, chars
from ankka.runtime.records.messages import AssistantMessage, Message, UserMessage

__all__ = ["Cut", "choose_cut"]


@dataclass(frozen=True, slots=True)
class Cut:
    """``replaced`` is what the summary will stand for (the earlier summary first); the
    events ``1..through`` are covered; ``base`` is the earlier summary's ``through`` (0 for
    none), which must still be the latest when the summary is written."""

    index: int
    through: int
    base: int
    replaced: tuple[Message, ...]
    replaces: int
    replaced_chars: int
    chars_before: int


def _starts_turn(previous: Message, message: Message) -> bool:
    if isinstance(message, UserMessage):
        return True
    return (
        isinstance(message, AssistantMessage)
        and bool(message.turn)
        and (message.turn != previous.turn)
    )


def choose_cut(view: SentView, settings: Compaction) -> Cut | None:
    """The cut for ``view`` now, or ``None`` when no whole turn can be summarised."""
    verbatim = view.verbatim
    count = len(verbatim)
    earlier = view.summary_message
    earlier_chars = chars(earlier) if earlier is not None else 0
    # prefix[i]: characters of verbatim[:i]
    prefix = [0]
    for message in verbatim:
        prefix.append(prefix[-1] + chars(message))
    candidates = [
        i
        for i in range(1, count - settings.keep_messages + 1)
        if i == count or _starts_turn(verbatim[i - 1], verbatim[i])
    ]
    if not candidates:
        return None
    fitting = [i for i in candidates if earlier_chars + prefix[i] <= settings.max_replaced_chars]
    index = fitting[-1] if fitting else candidates[0]
    if prefix[index] < settings.min_new_chars:
        return None  # too little to fold in for a summariser call: wait for more turns
    replaced = ((earlier,) if earlier is not None else ()) + tuple(verbatim[:index])
    base = view.summary.through if view.summary is not None else 0
    return Cut(
        index=index,
        through=view.seqs[index - 1],
        base=base,
        replaced=replaced,
        replaces=(view.summary.replaces if view.summary is not None else 0) + index,
        replaced_chars=earlier_chars + prefix[index],
        chars_before=view.chars,
    )
