"""ankka's own model path against a real model: llama.cpp serving SmolLM2 on loopback.

Everything that talks to a model, except tool calling (SmolLM2 cannot call tools), is proved
here on a real server as well as on the stand-in: the Chat Completions provider's plain and
streamed answers and usage, a typed answer through the loop (a JSON-schema response format,
which llama.cpp enforces with a grammar), and a whole turn through ``ankka serve``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel

from ankka.runtime.declare.agents import Turn
from ankka.runtime.providers.base import ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.chat_completions import ChatCompletionsProvider
from ankka.runtime.records.messages import UserMessage
from tests.integration.llamacpp import LlamaServer
from tests.support.processes import Server, ankka_command, start
from tests.support.runtimes import one_turn

pytestmark = pytest.mark.integration

QUESTION = ModelRequest(
    instructions="Answer in one short sentence.",
    messages=(UserMessage("What colour is the sky on a clear day?"),),
)


def provider(llama: LlamaServer) -> ChatCompletionsProvider:
    return ChatCompletionsProvider(name="local", model=llama.model, base_url=llama.openai_base_url)


async def test_a_plain_answer_with_usage(llama_server: LlamaServer) -> None:
    model = provider(llama_server)
    try:
        answer = await model.complete(QUESTION)
    finally:
        await model.aclose()
    assert answer.content
    assert answer.tool_calls == ()
    assert answer.usage.input_tokens > 10
    assert answer.usage.output_tokens > 0
    assert answer.model == llama_server.model


async def test_a_streamed_answer_adds_up_and_reports_usage(llama_server: LlamaServer) -> None:
    model = provider(llama_server)
    deltas: list[str] = []
    final: list[ModelResponse] = []
    try:
        async for item in model.stream(QUESTION):
            if isinstance(item, TextDelta):
                deltas.append(item.text)
            else:
                final.append(item)
    finally:
        await model.aclose()
    assert len(deltas) > 1
    assert len(final) == 1
    assert "".join(deltas) == final[0].content
    assert final[0].usage.output_tokens > 0  # usage came in the last chunk (include_usage)


class Sky(BaseModel):
    colour: str
    clear: bool


async def test_a_typed_answer_decodes_from_the_real_model(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    model = provider(llama_server)
    effect = Turn(
        message="Describe the sky on a clear day as JSON with 'colour' and 'clear'.",
        answer=Sky,
    )
    try:
        outcome = await one_turn(effect, model, tmp_path / "store.sqlite3")
    finally:
        await model.aclose()
    assert isinstance(outcome.value, Sky)
    assert outcome.value.colour
    assert outcome.usage.output_tokens > 0


def test_a_whole_turn_through_ankka_serve(
    llama_server: LlamaServer, serve_env: Callable[[LlamaServer], Server]
) -> None:
    server = serve_env(llama_server)
    answer = httpx.post(
        f"{server.url}/v1/agents/polite/sessions/real",
        json={"message": "Say hello in three words."},
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert isinstance(body["reply"], str)
    assert body["reply"]
    assert body["usage"]["output_tokens"] > 0
    stored = httpx.get(f"{server.url}/v1/sessions/real/messages").json()["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1]["model_call"]["model"] == llama_server.model


@pytest.fixture
def serve_env(tmp_path: Path) -> Iterator[Callable[[LlamaServer], Server]]:
    """``ankka serve`` on the test service with the default model pointed at ``llama``."""
    servers: list[Server] = []

    def make(llama: LlamaServer) -> Server:
        server = start(
            ankka_command(
                "serve",
                "tests.integration.services",
                "--port",
                "0",
                "--store",
                f"sqlite:///{tmp_path}/real.sqlite3",
            ),
            env={
                "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
                "ANKKA_MODEL_DEFAULT_URL": llama.openai_base_url,
                "ANKKA_MODEL_DEFAULT_MODEL": llama.model,
            },
        )
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()
