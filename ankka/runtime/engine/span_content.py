"""Message content as the GenAI conventions record it on spans, when a deployment opts in.

Off by default (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``, read by ``ankka
serve``): a span then says which model, which tool, how many tokens, never what was said.
Opted in, the ``chat`` span carries ``gen_ai.system_instructions``, ``gen_ai.input.messages``
and ``gen_ai.output.messages``, and ``execute_tool`` its ``gen_ai.tool.call.arguments`` and
``.result``, in the conventions' shapes (role and typed parts). Every text goes through
:func:`ankka._kernel.redact.redact` first (configured keys and anything shaped like a
credential), and each attribute is cut to :data:`LIMIT` characters. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ankka._kernel.redact import redact
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    SummaryMessage,
    ToolResult,
    UserMessage,
)

__all__ = ["LIMIT", "bounded", "input_messages", "output_messages", "system_instructions"]

LIMIT = 16 * 1024
"""The most characters one content attribute holds (the rest is cut, saying so)."""

_CUT = "…[cut]"


def bounded(text: str) -> str:
    """``text`` redacted and cut to :data:`LIMIT` characters."""
    text = redact(text)
    return text if len(text) <= LIMIT else text[: LIMIT - len(_CUT)] + _CUT


def _arguments(raw: str) -> object:
    try:
        return json.loads(raw or "{}")
    except ValueError:
        return raw


def _parts(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"role": "user", "parts": [{"type": "text", "content": message.content}]}
    if isinstance(message, SummaryMessage):
        return {"role": "user", "parts": [{"type": "text", "content": message.content}]}
    if isinstance(message, ToolResult):
        part = {"type": "tool_call_response", "id": message.call_id, "result": message.content}
        return {"role": "tool", "parts": [part]}
    assert isinstance(message, AssistantMessage)
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append({"type": "text", "content": message.content})
    for call in message.tool_calls:
        parts.append(
            {
                "type": "tool_call",
                "id": call.id,
                "name": call.name,
                "arguments": _arguments(call.arguments),
            }
        )
    return {"role": "assistant", "parts": parts}


def _json(value: object) -> str:
    return bounded(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def input_messages(messages: Sequence[Message]) -> str:
    """``gen_ai.input.messages``: what the model was sent, as JSON."""
    return _json([_parts(m) for m in messages])


def output_messages(answer: AssistantMessage, finish_reason: str | None) -> str:
    """``gen_ai.output.messages``: the model's answer, as JSON."""
    shown = _parts(answer)
    shown["finish_reason"] = finish_reason or ""
    return _json([shown])


def system_instructions(instructions: str) -> str:
    """``gen_ai.system_instructions``: the instructions sent apart from the messages."""
    return _json([{"type": "text", "content": instructions}])
