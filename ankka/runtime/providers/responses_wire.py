"""OpenAI Responses wire format, for OpenAI's own API: built and read by ankka itself.

The ``openai`` SDK is the transport only (:mod:`.responses`). Pure functions; no I/O.

Choices made here:

- ``store`` is false: OpenAI keeps nothing of a session, ankka's journal is the record. So a
  reasoning model's reasoning items come back with ``encrypted_content`` (asked for with
  ``include``) and are the provider state; they are replayed, verbatim and before the calls
  they led to, on the assistant messages of the current turn only (after the last user
  message). An earlier turn's calls go back without their reasoning, which was never kept.
- A reasoning item without ``encrypted_content`` is not kept: OpenAI could not find it again.
- Tool arguments are the JSON text the model wrote (Responses sends them as a string).
- Splicing (:mod:`.prefixes`): a session's stable input items (all before the first answer
  whose reasoning is replayed) are encoded once and spliced into its next request.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
    "WIRE",
    "StreamAccumulator",
    "encode_request",
    "items",
    "read_response",
    "read_usage",
]

WIRE = "responses"
_dumps = dumps


def _item_lists(messages: Sequence[Message], begin: int) -> Iterator[list[dict[str, Any]]]:
    """Each message's items from ``begin`` on; replay is judged over the whole request."""
    start = current_turn_start(messages)
    for index in range(begin, len(messages)):
        message = messages[index]
        if isinstance(message, UserMessage):
            yield [{"role": "user", "content": message.content}]
        elif isinstance(message, SummaryMessage):
            text = f"Summary of the earlier conversation:\n{message.content}"
            yield [{"role": "user", "content": text}]
        elif isinstance(message, ToolResult):
            yield [
                {
                    "type": "function_call_output",
                    "call_id": message.call_id,
                    "output": message.content,
                }
            ]
        else:
            state = message.provider_state
            if state is not None and replayable(state, WIRE, index, start):
                yield [*state.items, *_assistant(message)]
            else:
                yield _assistant(message)


def _input(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [item for items in _item_lists(messages, 0) for item in items]


def items(request: ModelRequest, begin: int) -> Items:
    """The input array's items from message ``begin`` on. Every message's items stand alone;
    only an answer whose reasoning is replayed (after the last user message) can change, when
    a user message comes after it: the stable prefix ends before the first such answer."""
    messages = request.messages
    start = current_turn_start(messages)
    stable = first_replayed(messages, WIRE, begin, start)
    encoded: list[bytes] = []
    count = 0
    for index, wire in enumerate(_item_lists(messages, begin), begin):
        if index == stable:
            count = len(encoded)
        encoded.extend(_dumps(item).encode() for item in wire)
    return Items(encoded, stable, len(encoded) if stable == len(messages) else count)


def _assistant(message: AssistantMessage) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if message.content:
        items.append({"role": "assistant", "content": message.content})
    for call in message.tool_calls:
        items.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.arguments,
            }
        )
    return items


def encode_request(
    request: ModelRequest,
    *,
    model: str,
    stream: bool,
    extra: Mapping[str, Any] | None = None,
    memo: EncodedPrefixes | None = None,
) -> bytes:
    """The request's body. With ``memo``, the stable items sent before are spliced in as the
    bytes they were encoded to then (byte-identical to encoding them again)."""
    body: dict[str, Any] = {"model": model}
    if request.instructions:
        body["instructions"] = request.instructions
    body["input"] = None
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            }
            for t in request.tools
        ]
        if request.tool_choice == "required":
            body["tool_choice"] = "required"
    if request.output is not None:
        body["text"] = {
            "format": {
                "type": "json_schema",
                "name": request.output.name,
                "schema": request.output.schema,
            }
        }
    if request.reasoning_effort is not None:
        body["reasoning"] = {"effort": request.reasoning_effort}
        body["include"] = ["reasoning.encrypted_content"]
    if request.max_output_tokens is not None:
        body["max_output_tokens"] = request.max_output_tokens
    body["store"] = False
    if stream:
        body["stream"] = True
    spliced = None if memo is None else (memo, request, items)
    return encode_body(body, "input", extra, lambda: _input(request.messages), spliced)


def read_usage(raw: Mapping[str, Any] | None) -> Usage:
    if not raw:
        return Usage()
    details = raw.get("input_tokens_details") or {}
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0),
        output_tokens=int(raw.get("output_tokens") or 0),
        cache_read_tokens=int(details.get("cached_tokens") or 0),
        cache_write_tokens=int(details.get("cache_write_tokens") or 0),
    )


def _failure(body: Mapping[str, Any]) -> str | None:
    if body.get("status") != "failed":
        return None
    error = body.get("error") or {}
    return str(error.get("message") or "no detail") if isinstance(error, Mapping) else str(error)


def read_response(body: Mapping[str, Any], *, model: str) -> ModelResponse:
    """Read a Responses answer. Raises ValueError when it is not one, StreamFailed on failure."""
    failed = _failure(body)
    if failed is not None:
        raise StreamFailed(failed)
    output = body.get("output")
    if not isinstance(output, list):
        raise ValueError("the answer has no output list")
    text: list[str] = []
    calls: list[ToolCall] = []
    state: list[dict[str, Any]] = []
    for item in output:
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if part.get("type") == "output_text":
                    text.append(str(part.get("text") or ""))
        elif kind == "function_call":
            arguments = item.get("arguments")
            calls.append(
                ToolCall(
                    str(item.get("call_id") or item.get("id")),
                    str(item["name"]),
                    arguments if isinstance(arguments, str) else _dumps(arguments or {}),
                )
            )
        elif kind == "reasoning" and item.get("encrypted_content"):
            # With store=false only an item carrying its encrypted content can go back; one
            # without (a reasoning model asked for no effort, so nothing was included) would
            # be refused as an unknown id, so it is dropped.
            state.append(dict(item))
    return ModelResponse(
        content="".join(text) if text else None,
        tool_calls=tuple(calls),
        usage=read_usage(body.get("usage")),
        model=str(body.get("model") or model),
        provider_state=ProviderState(WIRE, tuple(state)) if state else None,
        finish_reason=_finish_reason(body),
    )


def _finish_reason(body: Mapping[str, Any]) -> str | None:
    """Responses' own words: the reason an incomplete answer stopped, else its status."""
    details = body.get("incomplete_details")
    if isinstance(details, Mapping) and details.get("reason"):
        return str(details["reason"])
    status = body.get("status")
    return str(status) if status else None


@dataclass
class StreamAccumulator:
    """Folds streamed events into one answer: text deltas, function-call argument deltas and
    finished items; ``response.completed`` carries the whole answer and wins when it comes."""

    model: str
    items: dict[int, dict[str, Any]] = field(default_factory=dict)
    arguments: dict[int, list[str]] = field(default_factory=dict)
    completed: Mapping[str, Any] | None = None

    def add(self, event: Mapping[str, Any]) -> str | None:
        kind = event.get("type")
        if kind == "response.output_text.delta":
            delta = str(event.get("delta") or "")
            return delta or None
        if kind == "response.output_item.added" or kind == "response.output_item.done":
            self.items[int(event.get("output_index", len(self.items)))] = dict(event["item"])
        elif kind == "response.function_call_arguments.delta":
            index = int(event.get("output_index", 0))
            self.arguments.setdefault(index, []).append(str(event.get("delta") or ""))
        elif kind == "response.completed" or kind == "response.incomplete":
            self.completed = event.get("response") or {}
        elif kind == "response.failed":
            raise StreamFailed(_failure(event.get("response") or {}) or "no detail")
        elif kind == "error":
            raise StreamFailed(str(event.get("message") or "no detail"))
        return None

    def result(self) -> ModelResponse:
        if self.completed is not None and self.completed.get("output"):
            return read_response(self.completed, model=self.model)
        output: list[dict[str, Any]] = []
        for index, item in sorted(self.items.items()):
            if item.get("type") == "function_call" and not item.get("arguments"):
                item = {**item, "arguments": "".join(self.arguments.get(index, ()))}
            output.append(item)
        completed = self.completed or {}
        body = {"output": output, "usage": completed.get("usage")}
        for key in ("status", "incomplete_details"):
            if key in completed:
                body[key] = completed[key]
        return read_response(body, model=self.model)
