"""Render a script turn as Anthropic Messages: one JSON answer or a stream of typed events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ankka.runtime.providers.script import ScriptTurn
from ankka.runtime.records.messages import Usage

__all__ = ["answer", "events", "signature"]


def signature(number: int) -> str:
    return f"standin-signature-{number}"


def _usage(usage: Usage) -> dict[str, Any]:
    # Anthropic counts cache reads and writes apart from input_tokens.
    uncached = usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens
    return {
        "input_tokens": max(uncached, 0),
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
    }


def _content(turn: ScriptTurn, number: int) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if turn.reasoning is not None:
        content.append(
            {"type": "thinking", "thinking": turn.reasoning, "signature": signature(number)}
        )
    if turn.text is not None:
        content.append({"type": "text", "text": turn.text})
    for i, call in enumerate(turn.tool_calls):
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            arguments = {}
        content.append(
            {"type": "tool_use", "id": f"toolu_{number}_{i}", "name": call.name, "input": arguments}
        )
    return content


def answer(turn: ScriptTurn, *, model: str, number: int) -> dict[str, Any]:
    return {
        "id": f"msg_standin_{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _content(turn, number),
        "stop_reason": "tool_use" if turn.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": _usage(turn.usage),
    }


def _split(text: str) -> list[str]:
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def events(turn: ScriptTurn, *, model: str, number: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, data) pairs, as Anthropic streams them."""
    whole = answer(turn, model=model, number=number)
    usage = whole["usage"]
    start = {**whole, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for index, block in enumerate(whole["content"]):
        kind = block["type"]
        if kind == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _split(block["text"])]
        elif kind == "thinking":
            opened = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        else:
            opened = {**block, "input": {}}
            text = json.dumps(block["input"])
            half = len(text) // 2
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in (text[:half], text[half:])
            ]
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": opened,
            },
        )
        for delta in deltas:
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": delta,
                },
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}
