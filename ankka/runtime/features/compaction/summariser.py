"""The summariser: one direct provider call, no agent, no session, no tools.

An agent would need a session, and the only sensible one is the session being summarised, so
it would append its own turns to the history it is shortening. The request is the
instructions and one user message: the earlier summary (if any) and the transcript of the
messages to fold into it. It declares no tools and no answer schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from ankka.runtime.declare.compaction import Compaction
from ankka.runtime.providers.base import ModelProvider, ModelRequest
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    SummaryMessage,
    ToolResult,
    Usage,
    UserMessage,
)

if TYPE_CHECKING:
    from ankka.runtime.engine.spans import EngineSpans

__all__ = ["Summary", "summarise", "summary_request", "transcript"]


@dataclass(frozen=True, slots=True)
class Summary:
    text: str
    provider: str
    model: str
    usage: Usage


def _line(message: Message) -> str:
    if isinstance(message, UserMessage):
        return f"user: {message.content}"
    if isinstance(message, AssistantMessage):
        parts = [f"assistant: {message.content}"] if message.content else []
        parts += [f"assistant called {c.name}({c.arguments})" for c in message.tool_calls]
        return "\n".join(parts)
    if isinstance(message, ToolResult):
        failed = " (failed)" if message.is_error else ""
        return f"tool {message.name}{failed}: {message.content}"
    return f"summary: {message.content}"


def transcript(replaced: Sequence[Message]) -> str:
    """The user message the summariser is sent."""
    earlier = [m for m in replaced if isinstance(m, SummaryMessage)]
    rest = [_line(m) for m in replaced if not isinstance(m, SummaryMessage)]
    head = (
        f"The earlier summary:\n{earlier[0].content}\n\nThe conversation that followed it:\n"
        if earlier
        else "The conversation so far:\n"
    )
    return head + "\n".join(line for line in rest if line) + "\n\nWrite the new summary."


def summary_request(
    replaced: Sequence[Message], settings: Compaction, *, replaced_chars: int
) -> ModelRequest:
    """The summariser's request. Its answer is bounded to about as many tokens as the
    replaced messages have words' worth of characters (a summary longer than them would be
    rejected anyway), so a rambling model costs little and ends soon."""
    limit = min(4096, max(64, replaced_chars // 3))
    return ModelRequest(
        settings.instructions, (UserMessage(transcript(replaced)),), max_output_tokens=limit
    )


async def summarise(
    provider: ModelProvider, request: ModelRequest, spans: EngineSpans | None = None
) -> Summary:
    """Call the provider once (in a ``chat`` span when tracing is on); its errors propagate
    (the consumer skips and retries)."""
    if spans is None:
        response = await provider.complete(request)
    else:
        response = await spans.chat(provider, request, partial(provider.complete, request))
    return Summary(
        (response.content or "").strip(),
        provider.name,
        response.model or provider.model,
        response.usage,
    )
