"""Anthropic Messages wire format: requests built and answers read by ankka itself.

The ``anthropic`` SDK is the transport only (:mod:`.anthropic`): building the JSON here keeps
the translation still when the SDK's model classes change, and keeps a request's bytes stable
from call to call so Anthropic's prompt cache keeps hitting. Pure functions; no I/O.

Choices made here:

- Tool arguments are ankka's JSON text; Anthropic's ``input`` is an object, so it is decoded
  with :func:`json.loads` and answers are encoded with :func:`json.dumps`, never from a
  string rendering of a mapping.
- Thinking blocks (with their signatures) are the provider state. They are replayed on the
  assistant messages of the current turn only (after the last user message), as Anthropic
  requires while a tool round is in flight; earlier turns go back without them.
- A reasoning effort becomes a thinking budget (:data:`THINKING_BUDGETS`).
- ``input_tokens`` counts every input token: Anthropic reports cache reads and writes apart
  from its ``input_tokens``, ankka sums them (as Chat Completions' ``prompt_tokens`` does).
- A typed answer is asked for in the system prompt with the schema; the loop decodes it.
- Splicing (:mod:`.prefixes`): a session's stable wire messages (all but the last, and none
  from the first answer whose thinking is replayed) are encoded once and spliced into its
  next request.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ankka._kernel.errors import RequestError
from ankka.runtime.providers.base import ModelRequest, ModelResponse
from ankka.runtime.providers.failures import StreamFailed
from ankka.runtime.providers.prefixes import EncodedPrefixes, Items, dumps, encode_body
from ankka.runtime.providers.replay import current_turn_start, first_replayed, replayable
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ProviderState,
    SummaryMessage,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)

__all__ = [
    "THINKING_BUDGETS",
    "WIRE",
    "StreamAccumulator",
    "encode_request",
    "items",
    "read_response",
    "read_usage",
]

WIRE = "anthropic"
THINKING_BUDGETS: dict[str, int] = {"low": 1024, "medium": 4096, "high": 16384}
_NO_THINKING = ("none", "minimal")

_dumps = dumps


def _input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments)
    except ValueError:
        value = None
    # Anthropic's input must be an object; arguments that never decoded go back empty
    # (the tool result that answered them already told the model what was wrong).
    return value if isinstance(value, dict) else {}


def _assistant(message: AssistantMessage, replay: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if replay and message.provider_state is not None:
        blocks.extend(message.provider_state.items)
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call.arguments)}
        )
    return blocks


def _wire(messages: Sequence[Message], begin: int) -> tuple[list[dict[str, Any]], list[int]]:
    """The wire messages of ``messages[begin:]`` and the index of each one's first message;
    replay is judged over the whole request."""
    start = current_turn_start(messages)
    wire: list[dict[str, Any]] = []
    firsts: list[int] = []
    for index in range(begin, len(messages)):
        message = messages[index]
        role: str
        blocks: list[dict[str, Any]]
        if isinstance(message, UserMessage):
            role, blocks = "user", [{"type": "text", "text": message.content}]
        elif isinstance(message, SummaryMessage):
            text = f"Summary of the earlier conversation:\n{message.content}"
            role, blocks = "user", [{"type": "text", "text": text}]
        elif isinstance(message, ToolResult):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.call_id,
                "content": message.content,
            }
            if message.is_error:
                block["is_error"] = True
            role, blocks = "user", [block]
        else:
            role, blocks = (
                "assistant",
                _assistant(message, replay=replayable(message.provider_state, WIRE, index, start)),
            )
            if not blocks:
                continue
        # Anthropic wants roles to alternate: consecutive same-role messages become one.
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
            firsts.append(index)
    return wire, firsts


def _messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return _wire(messages, 0)[0]


def items(request: ModelRequest, begin: int) -> Items:
    """The messages array's items from message ``begin`` on. A wire message can change in two
    ways when messages are appended: the last one, as the next message of its role joins it,
    and one holding an answer whose thinking is replayed (after the last user message), as a
    later user message drops it. The stable prefix is every wire message that opens before
    the first such answer, but the last of those."""
    messages = request.messages
    wire, firsts = _wire(messages, begin)
    start = current_turn_start(messages)
    replayed = first_replayed(messages, WIRE, begin, start)
    count = bisect.bisect_left(firsts, replayed) - 1  # the last wire message opening before
    encoded = [_dumps(m).encode() for m in wire]
    if count < 0:
        return Items(encoded, begin, 0)
    return Items(encoded, firsts[count], count)


def _system(request: ModelRequest) -> str:
    system = request.instructions
    if request.output is not None:
        schema = _dumps(request.output.schema)
        system = (
            f"{system}\n\n" if system else ""
        ) + f"Answer with one JSON object only, following this JSON Schema:\n{schema}"
    return system


def encode_request(
    request: ModelRequest,
    *,
    model: str,
    max_tokens: int,
    stream: bool,
    extra: Mapping[str, Any] | None = None,
    memo: EncodedPrefixes | None = None,
) -> bytes:
    """The request's body. With ``memo``, the stable wire messages sent before are spliced in
    as the bytes they were encoded to then (byte-identical to encoding them again)."""
    if request.max_output_tokens is not None:
        max_tokens = min(max_tokens, request.max_output_tokens)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    system = _system(request)
    if system:
        body["system"] = system
    body["messages"] = None
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    effort = request.reasoning_effort
    if effort is not None and effort not in _NO_THINKING:
        budget = THINKING_BUDGETS.get(effort)
        if budget is None:
            offered = ", ".join([*THINKING_BUDGETS, *_NO_THINKING])
            raise RequestError(
                f"reasoning effort {effort!r} has no Anthropic thinking budget; use one of "
                f"{offered}"
            )
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        body["max_tokens"] = max_tokens + budget
    elif request.tools and request.tool_choice == "required":
        # Anthropic's "any"; with thinking only "auto" is allowed, so a thinking model may
        # still answer in text (an autonomous agent's loop treats that as a failed attempt).
        body["tool_choice"] = {"type": "any"}
    if stream:
        body["stream"] = True
    spliced = None if memo is None else (memo, request, items)
    return encode_body(body, "messages", extra, lambda: _messages(request.messages), spliced)


def read_usage(raw: Mapping[str, Any] | None) -> Usage:
    if not raw:
        return Usage()
    read = int(raw.get("cache_read_input_tokens") or 0)
    written = int(raw.get("cache_creation_input_tokens") or 0)
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0) + read + written,
        output_tokens=int(raw.get("output_tokens") or 0),
        cache_read_tokens=read,
        cache_write_tokens=written,
    )


def _state(items: list[dict[str, Any]]) -> ProviderState | None:
    return ProviderState(WIRE, tuple(items)) if items else None


def read_response(body: Mapping[str, Any], *, model: str) -> ModelResponse:
    """Read a non-streamed answer. Raises ValueError when it is not a Messages answer."""
    content = body.get("content")
    if body.get("type") != "message" or not isinstance(content, list):
        raise ValueError("the answer is not a message with content blocks")
    text: list[str] = []
    calls: list[ToolCall] = []
    state: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            text.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            calls.append(
                ToolCall(str(block["id"]), str(block["name"]), _dumps(block.get("input") or {}))
            )
        elif kind in ("thinking", "redacted_thinking"):
            state.append(dict(block))
    return ModelResponse(
        content="".join(text) if text else None,
        tool_calls=tuple(calls),
        usage=read_usage(body.get("usage")),
        model=str(body.get("model") or model),
        provider_state=_state(state),
        finish_reason=str(body["stop_reason"]) if body.get("stop_reason") else None,
    )


@dataclass
class _Block:
    data: dict[str, Any]
    parts: list[str] = field(default_factory=list)


@dataclass
class StreamAccumulator:
    """Folds streamed events (text, tool-use and thinking deltas) into one answer."""

    model: str
    blocks: dict[int, _Block] = field(default_factory=dict)
    usage_raw: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None

    def add(self, event: Mapping[str, Any]) -> str | None:
        """Fold one event; return the text it carries, if any."""
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            if message.get("model"):
                self.model = str(message["model"])
            self.usage_raw.update(message.get("usage") or {})
        elif kind == "content_block_start":
            self.blocks[int(event["index"])] = _Block(dict(event.get("content_block") or {}))
        elif kind == "content_block_delta":
            return self._delta(int(event["index"]), event.get("delta") or {})
        elif kind == "message_delta":
            stop = (event.get("delta") or {}).get("stop_reason")
            if stop:
                self.stop_reason = str(stop)
            self.usage_raw.update(
                {k: v for k, v in (event.get("usage") or {}).items() if v is not None}
            )
        elif kind == "error":
            error = event.get("error") or {}
            raise StreamFailed(str(error.get("message") or "no detail"))
        return None

    def _delta(self, index: int, delta: Mapping[str, Any]) -> str | None:
        block = self.blocks.setdefault(index, _Block({"type": "text", "text": ""}))
        kind = delta.get("type")
        if kind == "text_delta":
            text = str(delta.get("text") or "")
            block.data["text"] = str(block.data.get("text") or "") + text
            return text or None
        if kind == "input_json_delta":
            block.parts.append(str(delta.get("partial_json") or ""))
        elif kind == "thinking_delta":
            block.data["thinking"] = str(block.data.get("thinking") or "") + str(
                delta.get("thinking") or ""
            )
        elif kind == "signature_delta":
            block.data["signature"] = str(block.data.get("signature") or "") + str(
                delta.get("signature") or ""
            )
        return None

    def result(self) -> ModelResponse:
        content: list[dict[str, Any]] = []
        for _, block in sorted(self.blocks.items()):
            data = dict(block.data)
            if data.get("type") == "tool_use" and block.parts:
                joined = "".join(block.parts)
                try:
                    data["input"] = json.loads(joined) if joined.strip() else {}
                except ValueError:
                    data["input"] = {}
            content.append(data)
        body: dict[str, Any] = {"type": "message", "model": self.model, "content": content}
        body["stop_reason"] = self.stop_reason
        return read_response({**body, "usage": self.usage_raw}, model=self.model)
