"""The model seam: two methods, ``complete`` and ``stream``.

Everything the loop does with a model goes through :class:`ModelProvider`, so retries,
accounting and (later) durability wrap this one seam. Adapters translate
:class:`ModelRequest` to a vendor's wire format and the vendor's answer back to
:class:`ModelResponse`; they raise only :class:`ankka._kernel.errors.ModelError` and its
subclasses, naming the provider the service configured.

A provider that cannot stream implements ``stream`` with :func:`stream_by_completing`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ankka.api.capabilities import ModelCapabilities
from ankka.runtime.declare.judgments.seam import JudgmentProvider
from ankka.runtime.declare.tools import ToolSpec
from ankka.runtime.records.messages import Message, ProviderState, ToolCall, Usage

__all__ = [
    "AnswersJudgments",
    "CapabilitiesProbe",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "OutputSchema",
    "TextDelta",
    "ToolChoice",
    "stream_by_completing",
]

ToolChoice = Literal["auto", "required"]
"""Whether the model may answer in text (``auto``) or must call a tool (``required``: an
autonomous agent's requests, since a task ends only through its tools)."""


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
    tool_choice: ToolChoice = "auto"
    """``required``: the answer must call one of ``tools`` (sent only when there are tools)."""


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One answer. ``provider_state`` is the vendor's opaque state (reasoning items, thinking
    blocks) that the loop hands back within the same turn; see :class:`ProviderState`."""

    content: str | None
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    model: str
    provider_state: ProviderState | None = field(default=None, compare=False, repr=False)
    finish_reason: str | None = field(default=None, compare=False)
    """Why the model stopped, as its server said (``stop``, ``tool_calls``, ``length``,
    ``end_turn``, ...): the ``chat`` span's ``gen_ai.response.finish_reasons``."""


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


CapabilitiesProbe = Callable[[], Awaitable[ModelCapabilities]]


@runtime_checkable
class AnswersJudgments(Protocol):
    """A model provider whose wire can answer judgments (a server that returns logprobs):
    it gives the judgment provider over its own transport, so judgments reach the model
    through the model seam and nothing is configured twice. ``capabilities`` is the model's
    probe when a check sits in front of it; a provider whose probe does not report logprobs
    ignores it. None: this provider's model answers none (what it wraps does not)."""

    def judgment_provider(
        self, capabilities: CapabilitiesProbe | None = None
    ) -> JudgmentProvider | None: ...


async def stream_by_completing(
    provider: ModelProvider, request: ModelRequest
) -> AsyncIterator[TextDelta | ModelResponse]:
    """The stream of a provider that cannot stream: one completion, then its text at once."""
    response = await provider.complete(request)
    if response.content:
        yield TextDelta(response.content)
    yield response
