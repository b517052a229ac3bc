"""The model seam: two methods, ``complete`` and ``stream``.

Everything the loop does with a model goes through :class:`ModelProvider`, so retries,
accounting and (later) durability wrap this one seam. Adapters translate
:class:`ModelRequest` to a vendor's wire format and the vendor's answer back to
:class:`ModelResponse`; they raise only :class:`ankka._kernel.errors.ModelError` and its
subclasses, naming the provider the service configured.

A provider that cannot stream implements ``stream`` with :func:`stream_by_completing`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ankka.runtime.declare.tools import ToolSpec
from ankka.runtime.records.messages import Message, ProviderState, ToolCall, Usage

__all__ = [
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "OutputSchema",
    "TextDelta",
    "stream_by_completing",
]


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """The JSON Schema a typed answer must follow."""

    name: str
    schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    instructions: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    output: OutputSchema | None = None
    reasoning_effort: str | None = None
    max_output_tokens: int | None = None
    """The most tokens the answer may have, when the caller bounds it (the summariser does);
    ``None`` leaves it to the provider's own setting."""


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One answer. ``provider_state`` is the vendor's opaque state (reasoning items, thinking
    blocks) that the loop hands back within the same turn; see :class:`ProviderState`."""

    content: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    model: str
    provider_state: ProviderState | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@runtime_checkable
class ModelProvider(Protocol):
    """One configured model. ``name`` is the name the service gave it (used in errors)."""

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        """Yield text deltas, then exactly one :class:`ModelResponse` (the whole answer)."""
        ...

    async def aclose(self) -> None: ...


async def stream_by_completing(
    provider: ModelProvider, request: ModelRequest
) -> AsyncIterator[TextDelta | ModelResponse]:
    """The stream of a provider that cannot stream: one completion, then its text at once."""
    response = await provider.complete(request)
    if response.content:
        yield TextDelta(response.content)
    yield response
