"""The gateway's request check: what it reads, what it refuses, what it sends on."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# Every refusal is decided on the decoded values: JSON escapes cannot spell a checked key past
# the check (issue 13, defect 4).

_CHECKED_BODIES: list[dict[str, Any]] = [
    {"model": "m", "messages": [IMAGE_MESSAGE]},
    {
        "model": "m",
        "messages": [{"role": "user", "content": [{"image_url": {"url": "data:,"}}]}],
    },
    {"model": "m", "messages": [{"role": "user", "content": [{"type": "input_image"}]}]},
    {"model": "m", "messages": [{"role": "user", "content": [{"type": "image"}]}]},
    {"model": "m", "messages": [], "tools": [{"type": "function", "function": {"name": "f"}}]},
    {"model": "m", "messages": [], "functions": [{"name": "f"}]},
    {"model": "m", "messages": [], "reasoning_effort": "high"},
    {"model": "m", "messages": [], "reasoning": {"effort": "high"}},
    {"model": "m", "messages": [], "stream": True},
]


def _spell(text: str, escaped: list[bool], upper: bool) -> str:
    """``text`` as a JSON string literal with the flagged characters as \\u escapes."""
    out = []
    for i, char in enumerate(text):
        if escaped[i % len(escaped)]:
            code = f"{ord(char):04x}"
            out.append("\\u" + (code.upper() if upper else code))
        else:
            out.append(json.dumps(char)[1:-1])
    return '"' + "".join(out) + '"'


def _encode(value: Any, draw: Any) -> str:
    """JSON text for ``value`` where hypothesis picks which characters of each string escape."""
    if isinstance(value, dict):
        items = (f"{_encode(k, draw)}:{_encode(v, draw)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_encode(v, draw) for v in value) + "]"
    if isinstance(value, str) and value:
        flags = draw(st.lists(st.booleans(), min_size=1, max_size=len(value)))
        return _spell(value, flags, draw(st.booleans()))
    return json.dumps(value)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_CHECKED_BODIES), st.data())
def test_escaped_spellings_of_checked_keys_are_decided_as_the_plain_ones(
    plain: dict[str, Any], data: st.DataObject
) -> None:
    escaped = _encode(plain, data.draw).encode()
    assert json.loads(escaped) == plain  # the same request, spelt differently
    seen, expected = inspect(escaped), inspect(json.dumps(plain).encode())
    assert (seen.model, seen.stream, seen.tools, seen.effort, seen.images) == (
        expected.model,
        expected.stream,
        expected.tools,
        expected.effort,
        expected.images,
    )
    assert refusal(caps(), seen) == refusal(caps(), expected)


def test_an_escaped_image_url_key_is_an_image() -> None:
    raw = b'{"model":"m","messages":[{"role":"user","content":[{"\\u0069mage_url":{"url":"x"}}]}]}'
    assert refusal(caps(), inspect(raw)) == Refusal("vision", "messages")


# Malformed values the decisions read are 400s naming the field, never a crash (defect 5).


@pytest.mark.parametrize(
    ("fields", "code", "param"),
    [
        ({"reasoning_effort": {}}, "invalid_reasoning_effort", "reasoning_effort"),
        ({"reasoning_effort": []}, "invalid_reasoning_effort", "reasoning_effort"),
        ({"reasoning": {"effort": {}}}, "invalid_reasoning_effort", "reasoning_effort"),
        ({"reasoning": {"effort": [1]}}, "invalid_reasoning_effort", "reasoning_effort"),
        (
            {"messages": [{"role": "user", "content": [{"type": {"image": 1}}]}]},
            "invalid_content_part",
            "messages",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": ["image_url"]}]}]},
            "invalid_content_part",
            "messages",
        ),
    ],
)
def test_a_malformed_checked_value_is_a_bad_request(
    fields: dict[str, Any], code: str, param: str
) -> None:
    with pytest.raises(BadRequest) as bad:
        inspect(body(**fields))
    assert (bad.value.code, bad.value.param) == (code, param)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model":"m","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"model":"m","x":' + b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"}",
    ],
)
def test_deep_nesting_is_invalid_json(raw: bytes) -> None:
    with pytest.raises(BadRequest) as bad:
        inspect(raw)
    assert bad.value.code == "invalid_json"
    assert "nest" in bad.value.message


def test_a_body_nested_near_the_limit_is_still_forwarded_renamed() -> None:
    depth = 400
    raw = b'{"model":"m","x":' + b"[" * depth + b"]" * depth + b"}"
    sent = json.loads(forward_body(raw, inspect(raw), upstream_model="other"))
    assert sent["model"] == "other"
