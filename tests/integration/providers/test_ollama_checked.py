"""The ``ollama`` preset asks the server's ``/api/show`` too, and refuses before sending."""

from __future__ import annotations

import asyncio

import pytest

from ankka._kernel.errors import Refused
from ankka.runtime.declare.tools import ToolSpec
from ankka.runtime.providers.base import ModelRequest
from ankka.runtime.records.messages import UserMessage
from tests.integration.providers.conftest import Build, Standin

pytestmark = pytest.mark.integration

TOOL = ToolSpec("lookup", "Look something up", {"type": "object", "properties": {}})


async def test_an_ollama_model_without_tools_is_refused_a_tools_request_before_it_is_sent(
    standin: Standin, build: Build
) -> None:
    standin.script(["Plain answer."], {"llama3.2": {"capabilities": ["completion"]}})
    provider = build("llama", preset="ollama", model="llama3.2", url=f"{standin.url}/v1")

    with pytest.raises(Refused, match=r"'llama3\.2'.*lacks tools"):
        await provider.complete(ModelRequest("", [UserMessage("Look it up.")], [TOOL]))
    answer = await provider.complete(ModelRequest("", [UserMessage("Just talk.")]))

    assert answer.content == "Plain answer."
    assert [r["path"] for r in standin.requests()] == ["/api/show", "/v1/chat/completions"]


async def test_calls_that_start_together_ask_api_show_once(standin: Standin, build: Build) -> None:
    standin.script(["One.", "Two.", "Three."], {"llama3.2": {"capabilities": ["completion"]}})
    provider = build("llama", preset="ollama", model="llama3.2", url=f"{standin.url}/v1")
    hello = ModelRequest("", [UserMessage("Hello.")])

    answers = await asyncio.gather(*(provider.complete(hello) for _ in range(3)))

    assert sorted(a.content or "" for a in answers) == ["One.", "Three.", "Two."]
    assert [r["path"] for r in standin.requests()].count("/api/show") == 1
