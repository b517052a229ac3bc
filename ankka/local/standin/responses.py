"""Render a script turn as OpenAI Responses: one JSON answer or a stream of typed events."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from ankka.runtime.providers.script import ScriptTurn
from ankka.runtime.records.messages import Usage

__all__ = ["answer", "events", "reasoning_id"]


def reasoning_id(number: int) -> str:
    return f"rs_standin_{number}"


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def _output(turn: ScriptTurn, number: int) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if turn.reasoning is not None:
        sealed = base64.b64encode(turn.reasoning.encode()).decode()
        output.append(
            {
                "type": "reasoning",
                "id": reasoning_id(number),
                "summary": [],
                "encrypted_content": f"standin:{sealed}",
            }
        )
    if turn.text is not None:
        output.append(
            {
                "type": "message",
                "id": f"msg_standin_{number}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
        )
    for i, call in enumerate(turn.tool_calls):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_standin_{number}_{i}",
                "call_id": f"call_{number}_{i}",
                "name": call.name,
                "arguments": call.arguments,
                "status": "completed",
            }
        )
    return output


def answer(turn: ScriptTurn, *, model: str, number: int, created: int) -> dict[str, Any]:
    return {
        "id": f"resp_standin_{number}",
        "object": "response",
        "created_at": created,
        "status": "completed",
        "model": model,
        "output": _output(turn, number),
        "usage": _usage(turn.usage),
    }


def _split(text: str) -> list[str]:
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def events(
    turn: ScriptTurn, *, model: str, number: int, created: int
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, data) pairs, as OpenAI streams them."""
    whole = answer(turn, model=model, number=number, created=created)
    start = {**whole, "status": "in_progress", "output": [], "usage": None}
    sequence = 0

    def event(kind: str, **data: Any) -> tuple[str, dict[str, Any]]:
        nonlocal sequence
        sequence += 1
        return kind, {"type": kind, "sequence_number": sequence, **data}

    yield event("response.created", response=start)
    for index, item in enumerate(whole["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            for piece in _split(text):
                yield event(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                )
            yield event(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=text,
            )
        elif item["type"] == "function_call":
            arguments = item["arguments"]
            half = len(arguments) // 2
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            for piece in (arguments[:half], arguments[half:]):
                yield event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=piece,
                )
            yield event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=arguments,
            )
        else:
            yield event("response.output_item.added", output_index=index, item=item)
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=whole)
