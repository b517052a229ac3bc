"""ankka._kernel.jsonload.loads reads what json.loads reads, str and bytes alike."""

from __future__ import annotations

import json
import math

import pytest

from ankka._kernel.jsonload import loads

_BIG = "18446744073709551616"  # 2**64: orjson alone reads it as a float


@pytest.mark.parametrize("as_bytes", [False, True])
def test_an_integer_past_64_bits_stays_an_exact_integer(as_bytes: bool) -> None:
    text = '{"usage": {"prompt_tokens": ' + _BIG + "}}"
    data = loads(text.encode() if as_bytes else text)
    assert data == {"usage": {"prompt_tokens": 2**64}}
    assert type(data["usage"]["prompt_tokens"]) is int


@pytest.mark.parametrize("as_bytes", [False, True])
def test_what_orjson_refuses_is_read_as_json_reads_it(as_bytes: bool) -> None:
    text = '{"a": NaN, "b": "\\ud800"}'
    data = loads(text.encode() if as_bytes else text)
    assert math.isnan(data["a"]) and data["b"] == json.loads(text)["b"]


def test_what_neither_reads_fails_as_json_fails() -> None:
    with pytest.raises(json.JSONDecodeError):
        loads(b'{"a": ')


def test_an_ordinary_answer_decodes_the_same() -> None:
    text = '{"id": "x", "choices": [{"message": {"content": "hi"}}], "n": 1234567890123}'
    assert loads(text.encode()) == json.loads(text)
