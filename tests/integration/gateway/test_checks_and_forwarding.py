"""The gateway in front of the stand-in: what passes, what is refused before it is sent.

The stand-in answers Ollama's ``/api/show`` from its script, so each test decides what the model
can do, and ``/_standin/requests`` shows what reached the upstream. Callers use the official
``openai`` client, as a runtime would.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.integration.gateway.conftest import (
    StartGateway,
    StartStandin,
    standin_model,
)
from tests.support.eventually import eventually

pytestmark = pytest.mark.integration

TOOL: Any = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}
HI: Any = [{"role": "user", "content": "hi"}]


def script(capabilities: list[str], *turns: dict[str, Any], **model: Any) -> dict[str, Any]:
    return {
        "turns": list(turns) or [{"text": "hello"}],
        "models": {"small": {"capabilities": capabilities, **model}},
    }


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="none", max_retries=0)


def test_a_plain_request_passes_through_and_reports_usage(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(
        script(["completion"], {"text": "hello", "usage": {"input_tokens": 11, "output_tokens": 4}})
    )
    gateway = start_gateway([standin_model(standin.url)])

    answer = client(gateway.openai_url).chat.completions.create(model="small", messages=HI)

    assert answer.choices[0].message.content == "hello"
    assert answer.usage is not None
    assert answer.usage.prompt_tokens == 11
    [sent] = standin.chats()
    assert sent["body"] == {"model": "small", "messages": HI}
    metrics = gateway.metrics()
    assert 'ankka_gateway_prompt_tokens_total{caller="anonymous",model="small"} 11.0' in metrics
    assert 'ankka_gateway_completion_tokens_total{caller="anonymous",model="small"} 4.0' in metrics


def test_a_stream_arrives_in_pieces_and_usage_is_asked_for(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(
        script(
            ["completion"],
            {"text": "one two three", "usage": {"input_tokens": 3, "output_tokens": 5}},
        )
    )
    gateway = start_gateway([standin_model(standin.url)])

    stream = client(gateway.openai_url).chat.completions.create(
        model="small",
        messages=HI,
        stream=True,
    )
    pieces = [
        c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content
    ]

    assert pieces == ["one", " two", " three"]
    [sent] = standin.chats()
    assert sent["body"]["stream_options"] == {"include_usage": True}
    assert 'ankka_gateway_completion_tokens_total{caller="anonymous",model="small"} 5.0' in (
        gateway.metrics()
    )


def test_tools_to_a_model_without_tools_are_refused_and_nothing_is_sent(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(script(["completion"]))
    gateway = start_gateway([standin_model(standin.url)])

    with pytest.raises(openai.BadRequestError) as refused:
        client(gateway.openai_url).chat.completions.create(
            model="small",
            messages=HI,
            tools=[TOOL],
        )

    assert refused.value.code == "model_lacks_capability"
    assert "'small'" in refused.value.message
    assert "'tools'" in refused.value.message
    assert standin.chats() == []
    assert (
        'ankka_gateway_refusals_total{caller="anonymous",model="small",'
        'reason="model_lacks_capability"} 1.0'
    ) in gateway.metrics()


def test_tools_to_a_model_with_tools_pass(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(
        script(["completion", "tools"], {"tool_calls": [{"name": "get_weather"}]})
    )
    gateway = start_gateway([standin_model(standin.url)])

    answer = client(gateway.openai_url).chat.completions.create(
        model="small",
        messages=HI,
        tools=[TOOL],
    )

    calls = answer.choices[0].message.tool_calls
    assert calls is not None
    assert calls[0].type == "function"
    assert calls[0].function.name == "get_weather"
    assert len(standin.chats()) == 1


def test_an_effort_the_model_does_not_offer_is_refused(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(script(["completion", "thinking"], thinking=["low", "high"]))
    gateway = start_gateway([standin_model(standin.url)])
    caller = client(gateway.openai_url)

    with pytest.raises(openai.BadRequestError) as refused:
        caller.chat.completions.create(model="small", messages=HI, reasoning_effort="medium")
    assert refused.value.code == "model_lacks_capability"
    assert "medium" in refused.value.message
    assert standin.chats() == []

    caller.chat.completions.create(model="small", messages=HI, reasoning_effort="high")
    assert len(standin.chats()) == 1


def test_reasoning_effort_nested_form_is_checked_too(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(script(["completion"]))
    gateway = start_gateway([standin_model(standin.url)])

    answer = httpx.post(
        f"{gateway.openai_url}/chat/completions",
        json={"model": "small", "messages": HI, "reasoning": {"effort": "low"}},
    )

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "model_lacks_capability"
    assert standin.chats() == []


def test_an_image_to_a_model_without_vision_is_refused(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(script(["completion", "tools"]))
    gateway = start_gateway([standin_model(standin.url)])
    message: Any = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
    }

    with pytest.raises(openai.BadRequestError) as refused:
        client(gateway.openai_url).chat.completions.create(model="small", messages=[message])

    assert refused.value.code == "model_lacks_capability"
    assert "vision" in refused.value.message
    assert standin.chats() == []


def test_an_unknown_model_is_404_naming_the_served_ones(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(script(["completion"]))
    gateway = start_gateway([standin_model(standin.url)])

    with pytest.raises(openai.NotFoundError) as missing:
        client(gateway.openai_url).chat.completions.create(model="big", messages=HI)

    assert missing.value.code == "model_not_found"
    assert "'big'" in missing.value.message
    assert "small" in missing.value.message
    assert standin.chats() == []


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"model": "small", "messages": [', "invalid_json"),
        (b"[1, 2]", "invalid_json"),
        (b'{"messages": []}', "missing_model"),
        (b'{"model": 7, "messages": []}', "missing_model"),
    ],
)
def test_a_body_that_cannot_be_routed_is_400(
    start_standin: StartStandin, start_gateway: StartGateway, body: bytes, code: str
) -> None:
    standin = start_standin(script(["completion"]))
    gateway = start_gateway([standin_model(standin.url)])

    answer = httpx.post(f"{gateway.openai_url}/chat/completions", content=body)

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == code
    assert standin.chats() == []


def test_an_absurdly_large_body_is_413(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(script(["completion"]))
    gateway = start_gateway([standin_model(standin.url)], args=["--max-body-bytes", "100000"])
    huge = "x" * 2_000_000

    with pytest.raises(openai.APIStatusError) as too_big:
        client(gateway.openai_url).chat.completions.create(
            model="small",
            messages=[{"role": "user", "content": huge}],
        )

    assert too_big.value.status_code == 413
    assert too_big.value.code == "request_too_large"
    assert "100000 bytes" in too_big.value.message
    assert standin.chats() == []


def test_models_and_show_describe_what_each_model_can_do(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(
        script(["completion", "tools", "thinking"], thinking=["low", "high"], context_length=8192)
    )
    gateway = start_gateway([standin_model(standin.url)])

    listed = client(gateway.openai_url).models.list()
    shown = httpx.post(f"{gateway.url}/api/show", json={"model": "small"})
    unknown = httpx.post(f"{gateway.url}/api/show", json={"model": "big"})

    assert [m.id for m in listed.data] == ["small"]
    assert shown.status_code == 200
    assert shown.json()["capabilities"] == ["completion", "tools", "thinking"]
    assert shown.json()["thinking"] == {"values": ["low", "high"]}
    assert shown.json()["model_info"]["general.context_length"] == 8192
    assert unknown.status_code == 404


def test_a_large_body_without_a_length_is_cut_off_at_the_limit(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(script(["completion"]))
    gateway = start_gateway([standin_model(standin.url)], args=["--max-body-bytes", "100000"])

    def chunked() -> Iterator[bytes]:  # no Content-Length: sent with chunked encoding
        yield b'{"model": "small", "messages": [{"role": "user", "content": "'
        for _ in range(200):
            yield b"x" * 10_000
        yield b'"}]}'

    answer = httpx.post(f"{gateway.openai_url}/chat/completions", content=chunked())

    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "request_too_large"
    assert standin.chats() == []


def test_not_ready_until_every_model_was_probed(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(script(["completion"]))
    # A server that accepts connections and never answers: its probe cannot finish yet.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        silent_url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        gateway = start_gateway(
            [standin_model(standin.url), standin_model(silent_url, name="silent")], ready=False
        )
        eventually(
            lambda: httpx.get(f"{gateway.url}/readyz").json()["models"]["small"]["probed"],
            what="the stand-in's model to be probed",
        )

        ready = httpx.get(f"{gateway.url}/readyz")
        waiting = httpx.post(
            f"{gateway.openai_url}/chat/completions", json={"model": "silent", "messages": HI}
        )

    assert ready.status_code == 503
    assert ready.json()["models"]["silent"]["probed"] is False
    assert waiting.status_code == 503
    assert waiting.json()["error"]["code"] == "model_not_ready"
    assert waiting.headers["retry-after"] == "2"
