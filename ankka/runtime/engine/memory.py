"""Which past messages a turn reads: the pure selection behind ``agents.Memory``.

Selections keep whole turns. A request that began with a tool result, or with an answer whose
question was cut away, would break the strict role alternation providers expect.
"""

from __future__ import annotations

from collections.abc import Sequence

from ankka.runtime.declare.agents import Memory
from ankka.runtime.records.messages import Message, SummaryMessage, UserMessage

__all__ = ["select"]


def select(history: Sequence[Message], memory: Memory) -> Sequence[Message]:
    if memory.mode == "all":
        return history
    if memory.mode == "none":
        return ()
    if memory.mode == "agents":
        return [m for m in history if isinstance(m, SummaryMessage) or m.agent in memory.agents]
    tail = history[-memory.last_messages :]
    for index, message in enumerate(tail):
        if isinstance(message, UserMessage | SummaryMessage):
            return tail[index:]
    return ()
