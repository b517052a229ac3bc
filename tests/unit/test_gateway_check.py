"""The gateway's request check: what it reads, what it refuses, what it sends on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ankka.api.capabilities import Capability, ModelCapabilities
from ankka.gateway.check import BadRequest, Refusal, forward_body, inspect, refusal


def body(**fields: Any) -> bytes:
    return json.dumps({"model": "m", "messages": [], **fields}).encode()


def caps(*words: Capability, thinking: tuple[str, ...] = ()) -> ModelCapabilities:
    return ModelCapabilities("m", frozenset({Capability.COMPLETION, *words}), thinking)


IMAGE_MESSAGE = {
    "role": "user",
    "content": [
        {"type": "text", "text": "what is it"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ],
}


def test_a_plain_request_needs_nothing_beyond_completion() -> None:
    request = inspect(body())
    assert (request.model, request.stream, request.tools, request.effort, request.images) == (
        "m",
        False,
        False,
        None,
        False,
    )
    assert refusal(caps(), request) is None


def test_tools_need_the_tools_capability() -> None:
    request = inspect(body(tools=[{"type": "function", "function": {"name": "f"}}]))
    assert refusal(caps(), request) == Refusal("tools", "tools")
    assert refusal(caps(Capability.TOOLS), request) is None


def test_an_empty_tools_list_needs_nothing() -> None:
    assert refusal(caps(), inspect(body(tools=[]))) is None


def test_legacy_functions_count_as_tools() -> None:
    assert inspect(body(functions=[{"name": "f"}])).tools


@pytest.mark.parametrize(
    "fields", [{"reasoning_effort": "high"}, {"reasoning": {"effort": "high"}}]
)
def test_an_effort_must_be_among_the_thinking_values(fields: dict[str, Any]) -> None:
    request = inspect(body(**fields))
    assert request.effort == "high"
    refused = refusal(caps(Capability.THINKING, thinking=("low",)), request)
    assert refused is not None
    assert refused.param == "reasoning_effort"
    assert "high" in refused.capability
    assert refusal(caps(Capability.THINKING, thinking=("low", "high")), request) is None
    assert refusal(caps(), request) is not None


def test_effort_none_asks_for_no_thinking() -> None:
    assert inspect(body(reasoning_effort="none")).effort is None


def test_a_malformed_effort_is_a_bad_request() -> None:
    with pytest.raises(BadRequest) as bad:
        inspect(body(reasoning_effort=3))
    assert bad.value.param == "reasoning_effort"


def test_image_parts_need_vision() -> None:
    request = inspect(body(messages=[IMAGE_MESSAGE]))
    assert request.images
    assert refusal(caps(), request) == Refusal("vision", "messages")
    assert refusal(caps(Capability.VISION), request) is None


def test_the_word_image_in_text_is_not_an_image_part() -> None:
    text = {"role": "user", "content": "an image_url please"}
    assert not inspect(body(messages=[text])).images


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"{", "invalid_json"),
        (b"\xff\xfe", "invalid_json"),
        (b'"a string"', "invalid_json"),
        (b"{}", "missing_model"),
        (b'{"model": ""}', "missing_model"),
        (b'{"model": ["m"]}', "missing_model"),
    ],
)
def test_a_body_that_cannot_be_routed_is_refused_with_a_code(raw: bytes, code: str) -> None:
    with pytest.raises(BadRequest) as bad:
        inspect(raw)
    assert bad.value.code == code


def test_a_plain_body_is_forwarded_byte_for_byte() -> None:
    raw = b'{"model": "m",  "messages": [], "temperature": 0.5}'
    assert forward_body(raw, inspect(raw), upstream_model="m") is raw


def test_a_stream_asks_the_upstream_for_usage_without_reencoding() -> None:
    raw = b'{"model": "m", "stream": true, "messages": [] }\n'
    sent = forward_body(raw, inspect(raw), upstream_model="m")
    assert sent.startswith(b'{"model": "m", "stream": true, "messages": []')
    assert json.loads(sent)["stream_options"] == {"include_usage": True}


def test_existing_stream_options_are_kept_and_usage_added() -> None:
    raw = body(stream=True, stream_options={"include_obfuscation": False})
    sent = json.loads(forward_body(raw, inspect(raw), upstream_model="m"))
    assert sent["stream_options"] == {"include_obfuscation": False, "include_usage": True}


def test_a_stream_already_asking_for_usage_is_untouched() -> None:
    raw = body(stream=True, stream_options={"include_usage": True})
    assert forward_body(raw, inspect(raw), upstream_model="m") is raw


def test_a_renamed_model_is_sent_under_the_upstream_name() -> None:
    raw = body(temperature=0)
    sent = json.loads(forward_body(raw, inspect(raw), upstream_model="file.gguf"))
    assert sent == {"model": "file.gguf", "messages": [], "temperature": 0}
