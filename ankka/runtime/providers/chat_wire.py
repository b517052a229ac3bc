"""OpenAI Chat Completions wire format: requests built and answers read by ankka itself.

The SDK is the transport only. Building the JSON here (instead of handing the SDK typed
params it would walk and transform) keeps a request's bytes stable from call to call, so a
server's prompt cache keeps hitting, and keeps a long session's request cheap to build.

Splicing (:mod:`.prefixes`): :func:`items` encodes the messages array item by item; every
item is stable but a trailing summary (the next user message rides on it), so with an
:class:`EncodedPrefixes` a request encodes only the messages its session's previous request
did not have, plus that summary. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ankka.runtime.providers.base import ModelRequest, ModelResponse
from ankka.runtime.providers.prefixes import EncodedPrefixes, Items, dumps, encode_body
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    SummaryMessage,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)

__all__ = [
    "EncodedPrefixes",
    "StreamAccumulator",
    "encode_request",
    "items",
    "read_response",
    "read_usage",
]

_dumps = dumps


def _message(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.content}
    if isinstance(message, AssistantMessage):
        wire: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            wire["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in message.tool_calls
            ]
        return wire
    if isinstance(message, ToolResult):
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
    return {"role": "user", "content": f"Summary of the earlier conversation:\n{message.content}"}


def _wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = []
    previous: Message | None = None
    for message in messages:
        if isinstance(previous, SummaryMessage) and isinstance(message, UserMessage):
            # keep roles alternating: the summary rides on the next user message
            wire[-1]["content"] += "\n\n" + message.content
        else:
            wire.append(_message(message))
        previous = message
    return wire


def _system(instructions: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": instructions}] if instructions else []


def _messages(request: ModelRequest) -> list[dict[str, Any]]:
    return _system(request.instructions) + _wire(request.messages)


def items(request: ModelRequest, begin: int) -> Items:
    """The messages array's items from message ``begin`` on (with the system message when
    ``begin`` is 0): all stable but a trailing summary, which the next user message rides on."""
    messages = request.messages
    lead = _system(request.instructions) if begin == 0 else []
    encoded = [_dumps(m).encode() for m in lead + _wire(messages[begin:])]
    if messages and isinstance(messages[-1], SummaryMessage):
        return Items(encoded, len(messages) - 1, len(encoded) - 1)
    return Items(encoded, len(messages), len(encoded))


def encode_request(
    request: ModelRequest,
    *,
    model: str,
    stream: bool,
    extra: Mapping[str, Any] | None = None,
    memo: EncodedPrefixes | None = None,
) -> bytes:
    """The request's body. With ``memo``, the messages sent before are spliced in as the bytes
    they were encoded to then (byte-identical to encoding them again)."""
    body: dict[str, Any] = {"model": model, "messages": None}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
        if request.tool_choice == "required":
            body["tool_choice"] = "required"
    if request.output is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": request.output.name, "schema": request.output.schema},
        }
    if request.reasoning_effort is not None:
        body["reasoning_effort"] = request.reasoning_effort
    if request.max_output_tokens is not None:
        body["max_tokens"] = request.max_output_tokens
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    spliced = None if memo is None else (memo, request, items)
    return encode_body(body, "messages", extra, lambda: _messages(request), spliced)


def read_usage(raw: Mapping[str, Any] | None) -> Usage:
    if not raw:
        return Usage()
    details = raw.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0)
    return Usage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or 0),
        cache_read_tokens=cached,
        cache_write_tokens=int(details.get("cache_write_tokens") or 0),
    )


def _arguments(raw: object) -> str:
    # Some servers send arguments as an object; keep JSON text either way.
    if isinstance(raw, str):
        return raw
    return _dumps(raw if raw is not None else {})


def read_response(body: Mapping[str, Any], *, model: str) -> ModelResponse:
    """Read a non-streamed answer. Raises ValueError when it is not a Chat Completions answer."""
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ValueError("the answer has no choices")
    message = choices[0].get("message") or {}
    calls = tuple(
        ToolCall(
            str(c.get("id") or f"call_{i}"),
            str(c["function"]["name"]),
            _arguments(c["function"].get("arguments")),
        )
        for i, c in enumerate(message.get("tool_calls") or ())
    )
    reason = choices[0].get("finish_reason")
    return ModelResponse(
        content=message.get("content"),
        tool_calls=calls,
        usage=read_usage(body.get("usage")),
        model=str(body.get("model") or model),
        finish_reason=str(reason) if reason else None,
    )


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamAccumulator:
    """Folds streamed chunks (text and tool-call deltas) into one :class:`ModelResponse`."""

    model: str
    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None

    def add(self, chunk: Mapping[str, Any]) -> str | None:
        """Fold one chunk; return the text it carries, if any."""
        if chunk.get("model"):
            self.model = str(chunk["model"])
        if chunk.get("usage"):
            self.usage = read_usage(chunk["usage"])
        choices = chunk.get("choices") or ()
        if not choices:
            return None
        if choices[0].get("finish_reason"):
            self.finish_reason = str(choices[0]["finish_reason"])
        delta = choices[0].get("delta") or {}
        for raw in delta.get("tool_calls") or ():
            partial = self.calls.setdefault(int(raw.get("index", 0)), _PartialCall())
            if raw.get("id"):
                partial.id = str(raw["id"])
            function = raw.get("function") or {}
            if function.get("name"):
                partial.name += str(function["name"])
            if function.get("arguments") is not None:
                partial.arguments.append(_arguments(function["arguments"]))
        text = delta.get("content")
        if text:
            self.text.append(text)
            return str(text)
        return None

    def result(self) -> ModelResponse:
        calls = tuple(
            ToolCall(p.id or f"call_{i}", p.name, "".join(p.arguments))
            for i, p in sorted(self.calls.items())
        )
        content = "".join(self.text) if self.text else None
        return ModelResponse(
            content, calls, self.usage, self.model, finish_reason=self.finish_reason
        )
