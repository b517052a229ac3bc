"""Against the hosted APIs, only when their key is set (deselected otherwise, never skipped).

The stand-in speaks each wire as ankka's authors read the vendors' documents; these tests
are where the vendors themselves get a say, e.g. whether a tool call's arguments really
arrive as JSON. Models can be chosen with ANKKA_LIVE_ANTHROPIC_MODEL / ANKKA_LIVE_OPENAI_MODEL.
"""

from __future__ import annotations

import json
import os

import pytest

from ankka.runtime.declare.tools import ToolSpec
from ankka.runtime.providers.base import ModelRequest, TextDelta
from ankka.runtime.records.messages import UserMessage
from tests.integration.providers.conftest import Build

WEATHER = ToolSpec(
    "get_weather",
    "The current weather in a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
FORCE_TOOL = ModelRequest(
    "Always call get_weather before answering a question about the weather.",
    [UserMessage("What is the weather in Berlin?")],
    [WEATHER],
)
SAY_OK = ModelRequest("Answer with the single word OK.", [UserMessage("Ready?")])

HOSTED = [
    pytest.param(
        "anthropic",
        "ANTHROPIC_API_KEY",
        os.environ.get("ANKKA_LIVE_ANTHROPIC_MODEL", "claude-haiku-4-5"),
        marks=pytest.mark.live("ANTHROPIC_API_KEY"),
        id="anthropic",
    ),
    pytest.param(
        "openai",
        "OPENAI_API_KEY",
        os.environ.get("ANKKA_LIVE_OPENAI_MODEL", "gpt-5-mini"),
        marks=pytest.mark.live("OPENAI_API_KEY"),
        id="openai",
    ),
]

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("preset", "key", "model"), HOSTED)
async def test_a_hosted_model_answers_and_counts_its_tokens(
    preset: str, key: str, model: str, build: Build
) -> None:
    provider = build("hosted", preset=preset, model=model, api_key=os.environ[key])
    answer = await provider.complete(SAY_OK)
    assert answer.content
    assert answer.usage.input_tokens > 0
    assert answer.usage.output_tokens > 0


@pytest.mark.parametrize(("preset", "key", "model"), HOSTED)
async def test_a_hosted_models_tool_call_arguments_are_json(
    preset: str, key: str, model: str, build: Build
) -> None:
    provider = build("hosted", preset=preset, model=model, api_key=os.environ[key])
    answer = await provider.complete(FORCE_TOOL)
    (call,) = answer.tool_calls
    assert call.name == "get_weather"
    assert json.loads(call.arguments)["city"].lower().startswith("berlin")


@pytest.mark.parametrize(("preset", "key", "model"), HOSTED)
async def test_a_hosted_model_streams(preset: str, key: str, model: str, build: Build) -> None:
    provider = build("hosted", preset=preset, model=model, api_key=os.environ[key])
    items = [item async for item in provider.stream(SAY_OK)]
    assert any(isinstance(i, TextDelta) for i in items)
    assert not isinstance(items[-1], TextDelta)
