"""Which answers may carry a vendor's opaque state back to the vendor: this turn's only.

A reasoning item or thinking block is replayed while a turn's tool rounds are in flight (the
vendor needs it to go on reasoning) and never afterwards: earlier turns go back without it,
as OpenAI and Anthropic expect, and nothing of it is stored. Every adapter that replays state
asks :func:`current_turn_start`, so the rule is written once. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from ankka.runtime.records.messages import AssistantMessage, Message, ProviderState, UserMessage

__all__ = ["current_turn_start", "first_replayed", "replayable"]


def current_turn_start(messages: Sequence[Message]) -> int:
    """Index of the current turn's user message (state is replayed after it only)."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], UserMessage):
            return i
    return 0


def replayable(state: ProviderState | None, wire: str, index: int, start: int) -> bool:
    """True when ``state`` (on the message at ``index``) goes back to a ``wire`` provider."""
    return state is not None and state.wire == wire and index > start


def first_replayed(messages: Sequence[Message], wire: str, begin: int, start: int) -> int:
    """Index of the first answer from ``begin`` on whose state goes back to ``wire`` (its
    encoding changes once a user message follows), or ``len(messages)``."""
    for index in range(max(begin, start + 1), len(messages)):
        message = messages[index]
        if isinstance(message, AssistantMessage) and replayable(
            message.provider_state, wire, index, start
        ):
            return index
    return len(messages)
