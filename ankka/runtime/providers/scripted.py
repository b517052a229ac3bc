"""Test doubles for users' own tests: the scripted provider and a clock moved by hand.

:class:`ScriptedProvider` answers from a script (the same turns the stand-in server takes)
and records every request it was asked. It fails loudly when its script runs out, so a test
whose model quietly returned a default cannot pass by accident::

    provider = ScriptedProvider([{"tool_calls": [{"name": "get_weather",
                                                  "arguments": {"city": "Oslo"}}]},
                                 {"text": "It is sunny in Oslo."}])

Every key of the script format means here what it means to the stand-in: ``status`` raises
what an HTTP provider raises for that status (a scripted 503 is :class:`ModelUnavailable`, not
a success), ``delay_ms`` waits on the injected clock (a :class:`ManualClock`, re-exported
here from :mod:`ankka._kernel.clock`, lets a test decide
when the wait ends, with no sleeping), ``when``, ``call`` and ``contains`` serve the first
unserved turn that fits the request's last message, its call number and its text, and
``reasoning`` comes back as the answer's provider state.

Its judgment counterpart, :class:`ScriptedJudgmentProvider`, answers judgments from a script
(see :mod:`ankka.runtime.providers.scripted_judgments`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from ankka._kernel.clock import ManualClock, SleepingClock, SystemClock
from ankka._kernel.errors import ModelError
from ankka.runtime.providers.base import ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.failures import for_status
from ankka.runtime.providers.script import ScriptTurn, TurnQueue, parse_turn
from ankka.runtime.providers.scripted_judgments import ScriptedJudgmentProvider
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ProviderState,
    SummaryMessage,
    ToolCall,
    ToolResult,
    UserMessage,
)

__all__ = [
    "REASONING_WIRE",
    "ManualClock",
    "ScriptExhausted",
    "ScriptedJudgmentProvider",
    "ScriptedProvider",
]

REASONING_WIRE = "scripted"  # the ProviderState.wire of a scripted turn's reasoning


class ScriptExhausted(ModelError):
    """The script ran out: the test is missing a turn. Never worth a retry, so whoever
    retries failed model calls (a task's iterations) fails at once, by this type's own
    :attr:`retryable`, without knowing the test double."""

    kind = "script_exhausted"

    @property
    def retryable(self) -> bool:
        return False


def _last_role(messages: Sequence[Message]) -> str | None:
    """Who spoke last, in the words of the script's ``when``."""
    if not messages:
        return None
    last = messages[-1]
    if isinstance(last, UserMessage | SummaryMessage):
        return "user"
    if isinstance(last, ToolResult):
        return "tool"
    if isinstance(last, AssistantMessage):
        return "assistant"
    return None


def _text(request: ModelRequest) -> str:
    """The request's instructions and its messages' text, joined, for ``contains``."""
    parts = [request.instructions]
    for message in request.messages:
        content = getattr(message, "content", None)
        if isinstance(content, str):
            parts.append(content)
        if isinstance(message, AssistantMessage):
            parts.extend(call.arguments for call in message.tool_calls)
    return "\n".join(parts)


def _call_number(messages: Sequence[Message]) -> int:
    """Which model call of its conversation a request is: 1 + the model's answers it carries."""
    return 1 + sum(isinstance(m, AssistantMessage) for m in messages)


class ScriptedProvider:
    gen_ai_provider = "ankka.scripted"  # gen_ai.provider.name: a test double

    def __init__(
        self,
        script: Sequence[ScriptTurn | dict[str, Any] | str],
        *,
        name: str = "scripted",
        clock: SleepingClock | None = None,
    ) -> None:
        self._name = name
        self._clock = clock or SystemClock()
        self._queue = TurnQueue(
            [
                t if isinstance(t, ScriptTurn) else parse_turn(t, f"turn {i}")
                for i, t in enumerate(script)
            ]
        )
        self.requests: list[ModelRequest] = []
        # Counting a request's answers walks its history: only a script with ``call`` asks.
        self._counts_calls = any(t.call is not None for t in self._queue.turns)
        self._reads_text = any(t.contains is not None for t in self._queue.turns)

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> str:
        return "scripted"

    @property
    def remaining(self) -> int:
        return len(self._queue.turns) - self._queue.served

    def _take(self, request: ModelRequest) -> tuple[int, ScriptTurn]:
        role = _last_role(request.messages)
        call = _call_number(request.messages) if self._counts_calls else None
        turn = self._queue.take(role, call, _text(request) if self._reads_text else "")
        if turn is not None:
            return self._queue.served, turn
        total = len(self._queue.turns)
        if self.remaining == 0:
            detail = (
                f"the script ran out: all {total} turn(s) were served and call "
                f"{self._queue.served + 1} has nothing to answer"
            )
        else:
            detail = (
                f"the script has {self.remaining} of {total} turn(s) left, none for a request "
                f"whose last message is from {role!r} and which is model call "
                f"{_call_number(request.messages)} (see each turn's 'when', 'call' and 'contains')"
            )
        raise ScriptExhausted(self._name, detail)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        number, turn = self._take(request)
        if turn.delay_ms:
            await self._clock.sleep(turn.delay_ms / 1000)
        if turn.status is not None:
            raise for_status(self._name, turn.status, turn.text or "scripted error")
        calls = tuple(
            ToolCall(f"call_{number}_{i}", c.name, c.arguments)
            for i, c in enumerate(turn.tool_calls)
        )
        state = (
            None
            if turn.reasoning is None
            else ProviderState(REASONING_WIRE, ({"type": "reasoning", "text": turn.reasoning},))
        )
        reason = "tool_calls" if calls else "stop"
        return ModelResponse(
            turn.text, calls, turn.usage, "scripted", provider_state=state, finish_reason=reason
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        response = await self.complete(request)
        for piece in _pieces(response.content or ""):
            yield TextDelta(piece)
        yield response

    async def aclose(self) -> None:
        return None


def _pieces(text: str) -> list[str]:
    """Split text into word-sized pieces, keeping every character (as tokens would)."""
    pieces: list[str] = []
    start = 0
    for i, char in enumerate(text):
        if char == " " and i > start:
            pieces.append(text[start:i])
            start = i
    if start < len(text):
        pieces.append(text[start:])
    return pieces
