"""The real local model (llama.cpp + SmolLM2) answers every wire shape ankka relies on, except
tool calls, which its template lacks and which ``/props`` must therefore not advertise."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from openai import OpenAI
from openai.types.chat import ChatCompletionMessageParam
from pydantic import BaseModel, ConfigDict

from ankka.api.capabilities import Capability, from_llamacpp
from tests.integration.llamacpp import LlamaServer

pytestmark = pytest.mark.integration

# Greedy decoding (temperature 0, fixed seed): the same prompt gives the same answer, so a
# failure can be reproduced.
SEED = 7
QUESTION: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of France? Answer in one word."}
]


@pytest.fixture
def client(llama_server: LlamaServer) -> Iterator[OpenAI]:
    with OpenAI(base_url=llama_server.openai_base_url, api_key="none", max_retries=0) as sdk:
        yield sdk


def test_plain_chat_answers_text_from_the_served_model(
    client: OpenAI, llama_server: LlamaServer
) -> None:
    answer = client.chat.completions.create(
        model=llama_server.model, messages=QUESTION, max_tokens=16, temperature=0.0, seed=SEED
    )
    choice = answer.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content is not None
    assert choice.message.content.strip()
    assert choice.finish_reason in {"stop", "length"}
    assert not choice.message.tool_calls


def test_plain_chat_reports_usage(client: OpenAI, llama_server: LlamaServer) -> None:
    answer = client.chat.completions.create(
        model=llama_server.model, messages=QUESTION, max_tokens=16, temperature=0.0, seed=SEED
    )
    usage = answer.usage
    assert usage is not None
    assert usage.prompt_tokens > 0
    assert 0 < usage.completion_tokens <= 16
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_max_tokens_cuts_the_answer_with_finish_reason_length(
    client: OpenAI, llama_server: LlamaServer
) -> None:
    answer = client.chat.completions.create(
        model=llama_server.model,
        messages=[{"role": "user", "content": "Write a long story about a duck."}],
        max_tokens=3,
        temperature=0.0,
        seed=SEED,
    )
    assert answer.choices[0].finish_reason == "length"
    assert answer.usage is not None
    assert answer.usage.completion_tokens == 3


def test_streaming_chat_sends_deltas_then_a_usage_chunk(
    client: OpenAI, llama_server: LlamaServer
) -> None:
    stream = client.chat.completions.create(
        model=llama_server.model,
        messages=[{"role": "user", "content": "Name three colours."}],
        max_tokens=24,
        stream=True,
        stream_options={"include_usage": True},
        temperature=0.0,
        seed=SEED,
    )
    chunks = list(stream)
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta]
    text = "".join(d for d in deltas if d)
    assert len([d for d in deltas if d]) > 1, "expected the answer in several chunks"
    assert text.strip()
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] in {"stop", "length"}
    last = chunks[-1]
    assert last.choices == [], "the usage chunk comes last and carries no choices"
    assert last.usage is not None
    assert last.usage.prompt_tokens > 0
    assert last.usage.completion_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])


class CityAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    city: str
    country: str
    population_millions: int


CITY_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 40},
        "country": {"type": "string", "maxLength": 40},
        "population_millions": {"type": "integer", "minimum": 0, "maximum": 100},
    },
    "required": ["city", "country", "population_millions"],
    "additionalProperties": False,
}


def test_json_schema_response_format_gives_an_answer_that_decodes(
    client: OpenAI, llama_server: LlamaServer
) -> None:
    answer = client.chat.completions.create(
        model=llama_server.model,
        messages=[{"role": "user", "content": "Describe Paris as JSON."}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "city_answer", "schema": CITY_SCHEMA, "strict": True},
        },
        max_tokens=96,
        temperature=0.0,
        seed=SEED,
    )
    content = answer.choices[0].message.content
    assert answer.choices[0].finish_reason == "stop", content
    assert content is not None
    decoded = CityAnswer.model_validate(json.loads(content))
    assert 0 <= decoded.population_millions <= 100
    assert len(decoded.city) <= 40


def test_logprobs_come_with_each_token_and_the_requested_alternatives(
    client: OpenAI, llama_server: LlamaServer
) -> None:
    answer = client.chat.completions.create(
        model=llama_server.model,
        messages=QUESTION,
        max_tokens=8,
        logprobs=True,
        top_logprobs=2,
        temperature=0.0,
        seed=SEED,
    )
    logprobs = answer.choices[0].logprobs
    assert logprobs is not None
    assert logprobs.content
    assert answer.usage is not None
    assert len(logprobs.content) == answer.usage.completion_tokens
    for token in logprobs.content:
        assert token.logprob <= 0.0
        assert len(token.top_logprobs) == 2
        # Greedy decoding picks the most likely token, so it is the first alternative.
        assert token.top_logprobs[0].logprob >= token.top_logprobs[1].logprob


def test_a_tools_request_gets_text_and_no_tool_calls(
    client: OpenAI, llama_server: LlamaServer
) -> None:
    answer = client.chat.completions.create(
        model=llama_server.model,
        messages=[{"role": "user", "content": "What is the weather in Oslo?"}],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "The weather in a city.",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }
        ],
        max_tokens=24,
        temperature=0.0,
        seed=SEED,
    )
    assert not answer.choices[0].message.tool_calls
    assert answer.choices[0].finish_reason != "tool_calls"


def test_props_and_models_say_completion_without_tools_and_give_the_context_length(
    llama_server: LlamaServer,
) -> None:
    with httpx.Client(base_url=llama_server.base_url, timeout=10.0) as http:
        props = http.get("/props")
        models = http.get("/v1/models")
        show = http.post("/api/show", json={"model": llama_server.model})
    assert props.status_code == 200
    assert models.status_code == 200
    assert show.status_code == 404, "llama.cpp serves no /api/show; ankka derives it"
    served = [entry["id"] for entry in models.json()["data"]]
    assert served == [llama_server.model]

    caps = from_llamacpp(llama_server.model, props.json(), models.json())

    assert caps.has(Capability.COMPLETION)
    assert not caps.has(Capability.TOOLS)
    assert not caps.has(Capability.THINKING)
    assert not caps.has(Capability.VISION)
    assert caps.context_length == llama_server.ctx
