"""The loop's invariants on what is sent, checked on the bytes of each wire.

- **Roles alternate**: never two user or two assistant messages in a row (Chat Completions and
  Responses; a Responses function call is answered by its output before any message follows),
  and on Anthropic Messages strictly user, assistant, user, ... from a user message on.
- **What was sent is never rewritten**: a request that follows another of the same work, with
  no compaction between them, is it with messages appended: its message array opens with the
  one before's, byte for byte once encoded, and everything around the array is the same bytes.

Used on requests a test's scripted provider received (encoded here, on each wire) and on the
bodies the stand-in logged from a real process.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ankka.runtime.providers import anthropic_wire, chat_wire, responses_wire
from ankka.runtime.providers.base import ModelRequest

__all__ = ["ARRAY", "WIRES", "check_extends", "check_roles", "encode"]

WIRES = ("chat", "responses", "anthropic")
ARRAY = {"chat": "messages", "responses": "input", "anthropic": "messages"}


def encode(wire: str, request: ModelRequest) -> bytes:
    """``request``'s body as ankka sends it on ``wire`` (no memo: a whole encoding)."""
    if wire == "chat":
        return chat_wire.encode_request(request, model="m", stream=False)
    if wire == "responses":
        return responses_wire.encode_request(request, model="m", stream=False)
    return anthropic_wire.encode_request(request, model="m", max_tokens=1024, stream=False)


def _roles(wire: str, body: Mapping[str, Any]) -> list[str]:
    items: Sequence[Mapping[str, Any]] = body[ARRAY[wire]]
    if wire != "responses":
        return [str(m["role"]) for m in items]
    roles = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            roles.append(str(item["role"]))
        elif kind == "function_call":
            roles.append("call")
        elif kind == "function_call_output":
            roles.append("output")
    return roles


def check_roles(wire: str, body: Mapping[str, Any]) -> None:
    roles = _roles(wire, body)
    where = f"{wire}: {roles}"
    if wire == "anthropic":
        assert roles and roles[0] == "user", where
        assert all(a != b for a, b in itertools.pairwise(roles)), where
        return
    for a, b in itertools.pairwise(roles):
        assert not (a == b and a in ("user", "assistant")), where
        assert not (a == "call" and b in ("user", "assistant")), where


def _split(wire: str, raw: bytes) -> tuple[str, str, str]:
    """(what is before the message array, the array, what is after it) of a body's text."""
    text = raw.decode()
    key = f'"{ARRAY[wire]}":'
    start = text.index(key) + len(key)
    _, end = json.JSONDecoder().raw_decode(text, start)
    return text[:start], text[start:end], text[end:]


def check_extends(wire: str, before: bytes, after: bytes) -> None:
    """``after`` is ``before`` with messages appended, byte for byte."""
    head, array, tail = _split(wire, before)
    head2, array2, tail2 = _split(wire, after)
    assert head == head2 and tail == tail2, f"{wire}: the request around its messages changed"
    opened = array[:-1]  # without the closing bracket
    assert array2.startswith(opened), f"{wire}: an earlier message was sent differently"
    assert array2[len(opened)] in ",]", f"{wire}: the last message sent before changed"
