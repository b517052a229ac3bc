"""The vendor's opaque state in a real turn: replayed to the model within the turn, never
written to the journal (a session is ankka's, not a vendor's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ankka.runtime.declare.agents import Turn
from ankka.runtime.declare.tools import tool
from ankka.runtime.records.messages import AssistantMessage
from ankka.runtime.records.registry import decode, encode
from tests.integration.providers.conftest import Build, Standin, settings_for
from tests.support.runtimes import one_turn

pytestmark = pytest.mark.integration


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny in {city}"


@pytest.mark.parametrize("wire", ["anthropic", "openai"])
async def test_reasoning_goes_back_within_the_turn_and_is_never_journaled(
    wire: str, standin: Standin, build: Build, tmp_path: Path
) -> None:
    standin.script(
        [
            {
                "reasoning": "I should look it up.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
            },
            {"text": "Sunny in Oslo."},
        ]
    )
    provider = build("main", **settings_for(wire, standin))
    effect = Turn(message="Weather in Oslo?", tools=[get_weather], reasoning_effort="low")

    outcome = await one_turn(effect, provider, tmp_path / "store.sqlite3")

    assert outcome.text == "Sunny in Oslo."
    second = json.dumps(standin.requests()[1]["body"])
    marker = "I should look it up." if wire == "anthropic" else "rs_standin_1"
    assert marker in second, "the second call of the turn carries the first call's reasoning"
    asked = next(m for m in outcome.messages if isinstance(m, AssistantMessage) and m.tool_calls)
    assert asked.provider_state is not None
    for message in outcome.messages:
        kind, body = encode(message)
        assert marker not in body, "the journal never holds a vendor's state"
        assert "encrypted_content" not in body
        restored = decode(kind, body)
        if isinstance(restored, AssistantMessage):
            assert restored.provider_state is None
