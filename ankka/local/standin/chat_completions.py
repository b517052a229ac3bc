"""Render a script turn as OpenAI Chat Completions: one JSON answer or a stream of chunks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ankka.runtime.providers.script import ScriptTurn
from ankka.runtime.records.messages import Usage

__all__ = ["answer", "chunks"]


def _usage(usage: Usage) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
    }
    if usage.cache_write_tokens:
        wire["prompt_tokens_details"]["cache_write_tokens"] = usage.cache_write_tokens
    return wire


def _calls(turn: ScriptTurn, number: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{number}_{i}",
            "type": "function",
            "function": {"name": c.name, "arguments": c.arguments},
        }
        for i, c in enumerate(turn.tool_calls)
    ]


def answer(turn: ScriptTurn, *, model: str, number: int, created: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text}
    if turn.tool_calls:
        message["tool_calls"] = _calls(turn, number)
    return {
        "id": f"chatcmpl-standin-{number}",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if turn.tool_calls else "stop",
            }
        ],
        "usage": _usage(turn.usage),
    }


def _split(text: str) -> list[str]:
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def chunks(
    turn: ScriptTurn, *, model: str, number: int, created: int, include_usage: bool
) -> Iterator[dict[str, Any]]:
    base = {
        "id": f"chatcmpl-standin-{number}",
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    if turn.text:
        for piece in _split(turn.text):
            yield chunk({"content": piece})
    for i, call in enumerate(_calls(turn, number)):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call["id"],
                        "type": "function",
                        "function": {
                            "name": call["function"]["name"],
                            "arguments": arguments[:half],
                        },
                    }
                ]
            }
        )
        yield chunk({"tool_calls": [{"index": i, "function": {"arguments": arguments[half:]}}]})
    yield chunk({}, "tool_calls" if turn.tool_calls else "stop")
    if include_usage:
        yield {**base, "choices": [], "usage": _usage(turn.usage)}
