"""The gateway in front of a real llama.cpp server (SmolLM2-135M, CPU, loopback).

llama.cpp does not serve Ollama's ``/api/show``; the gateway derives what the model can do from
``/props`` (``chat_template_caps``). SmolLM2's template has no tool support, so a request with
tools must be refused by the gateway (llama.cpp itself would answer it in plain text, silently
ignoring the tools), while plain and streaming requests pass through.
"""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.integration.gateway.conftest import StartGateway
from tests.integration.llamacpp import LlamaServer as LlamaServerInfo

pytestmark = pytest.mark.integration

HI: Any = [{"role": "user", "content": "Say hello in three words."}]
TOOL: Any = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}


def gateway_for(start_gateway: StartGateway, llama: LlamaServerInfo) -> tuple[str, openai.OpenAI]:
    gateway = start_gateway(
        [
            {
                "name": "smollm2",
                "kind": "llamacpp",
                "url": llama.base_url,
                "upstream_model": llama.model,
            }
        ]
    )
    return gateway.url, openai.OpenAI(base_url=gateway.openai_url, api_key="none", max_retries=0)


def test_llamacpp_capabilities_come_from_props(
    start_gateway: StartGateway, llama_server: LlamaServerInfo
) -> None:
    url, _ = gateway_for(start_gateway, llama_server)

    shown = httpx.post(f"{url}/api/show", json={"model": "smollm2"})

    assert shown.status_code == 200
    assert shown.json()["capabilities"] == ["completion", "logprobs"]  # logprobs: probed
    assert shown.json()["model_info"]["general.context_length"] == 2048


def test_a_tools_request_to_llamacpp_is_refused_before_it_is_sent(
    start_gateway: StartGateway, llama_server: LlamaServerInfo
) -> None:
    _, caller = gateway_for(start_gateway, llama_server)

    with pytest.raises(openai.BadRequestError) as refused:
        caller.chat.completions.create(model="smollm2", messages=HI, tools=[TOOL])

    assert refused.value.code == "model_lacks_capability"
    assert "'smollm2'" in refused.value.message
    assert "'tools'" in refused.value.message


def test_a_plain_request_to_llamacpp_passes(
    start_gateway: StartGateway, llama_server: LlamaServerInfo
) -> None:
    _, caller = gateway_for(start_gateway, llama_server)

    answer = caller.chat.completions.create(model="smollm2", messages=HI, max_tokens=16)

    assert answer.choices[0].message.content
    assert answer.usage is not None
    assert answer.usage.completion_tokens > 0


def test_a_stream_from_llamacpp_streams_with_usage(
    start_gateway: StartGateway, llama_server: LlamaServerInfo
) -> None:
    _, caller = gateway_for(start_gateway, llama_server)

    chunks = list(
        caller.chat.completions.create(model="smollm2", messages=HI, max_tokens=16, stream=True)
    )

    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) > 1  # more than one piece: it streamed
    assert chunks[-1].usage is not None  # the gateway asked for usage; llama.cpp sent it last


def test_logprobs_pass_through_the_gateway(
    start_gateway: StartGateway, llama_server: LlamaServerInfo
) -> None:
    _, caller = gateway_for(start_gateway, llama_server)

    answer = caller.chat.completions.create(
        model="smollm2", messages=HI, max_tokens=4, logprobs=True, top_logprobs=2
    )

    logprobs = answer.choices[0].logprobs
    assert logprobs is not None
    assert logprobs.content
    assert all(len(t.top_logprobs) == 2 for t in logprobs.content)
