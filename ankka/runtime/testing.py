"""Test doubles for users' own tests: the scripted provider.

:class:`ScriptedProvider` answers from a script (the same turns the stand-in server takes)
and records every request it was asked. It fails loudly when its script runs out, so a test
whose model quietly returned a default cannot pass by accident::

    provider = ScriptedProvider([{"tool_calls": [{"name": "get_weather",
                                                  "arguments": {"city": "Oslo"}}]},
                                 {"text": "It is sunny in Oslo."}])

Its judgment counterpart, :class:`ScriptedJudgmentProvider`, answers judgments from a script
(see :mod:`ankka.runtime.judgments.scripted`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from ankka._kernel.errors import ModelError
from ankka.runtime.judgments.scripted import ScriptedJudgmentProvider
from ankka.runtime.messages import ToolCall
from ankka.runtime.providers.base import ModelRequest, ModelResponse, TextDelta
from ankka.runtime.script import ScriptTurn, parse_turn

__all__ = ["ScriptExhausted", "ScriptedJudgmentProvider", "ScriptedProvider"]


class ScriptExhausted(ModelError):
    kind = "script_exhausted"


class ScriptedProvider:
    def __init__(
        self, script: Sequence[ScriptTurn | dict[str, Any] | str], *, name: str = "scripted"
    ) -> None:
        self._name = name
        self._turns = [
            t if isinstance(t, ScriptTurn) else parse_turn(t, f"turn {i}")
            for i, t in enumerate(script)
        ]
        self._served = 0
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> str:
        return "scripted"

    @property
    def remaining(self) -> int:
        return len(self._turns) - self._served

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if self._served >= len(self._turns):
            raise ScriptExhausted(
                self._name,
                f"the script ran out: all {len(self._turns)} turn(s) were served and call "
                f"{self._served + 1} has nothing to answer",
            )
        turn = self._turns[self._served]
        self._served += 1
        calls = tuple(
            ToolCall(f"call_{self._served}_{i}", c.name, c.arguments)
            for i, c in enumerate(turn.tool_calls)
        )
        return ModelResponse(turn.text, calls, turn.usage, "scripted")

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
