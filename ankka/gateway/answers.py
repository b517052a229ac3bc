"""What the gateway itself answers, as pydantic models: the source of its OpenAPI document.

The gateway's routes render their answers through these models (:mod:`ankka.gateway.app`,
:func:`ankka.gateway.wire.error_body`), and :mod:`ankka.gateway.openapi` builds the document from
their JSON schemas, so the two cannot drift; schemathesis checks real answers against it. The
hot path is not slowed by them: a chat completion's answer is the upstream's, relayed as it
came, and only an error on it is rendered here. The request the gateway checks is
:class:`ChatRequest`: the fields its checks read, typed as OpenAI types them; every other
field passes through to the upstream.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

__all__ = [
    "ChatRequest",
    "ErrorFields",
    "Health",
    "ModelEntry",
    "ModelList",
    "ModelReadiness",
    "OpenAIError",
    "Readiness",
    "Show",
    "ShowError",
    "ShowRequest",
    "Thinking",
]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorFields(_Closed):
    message: str = Field(description="what was wrong, and what to do")
    type: str
    param: str | None
    code: str


class OpenAIError(_Closed):
    """Every error of the OpenAI-shaped routes: the official clients raise their own
    exception for it, with ``code`` set."""

    error: ErrorFields


class ContentPart(_Open):
    type: str = Field(default="text", examples=["text", "image_url"])
    text: str | SkipJsonSchema[None] = None
    image_url: dict[str, str] | SkipJsonSchema[None] = None


class ChatMessage(_Open):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None


class Reasoning(_Open):
    effort: str | SkipJsonSchema[None] = None


class ChatRequest(_Open):
    """A chat completion as the gateway reads it; other fields pass through."""

    model: str = Field(examples=["small"])
    messages: list[ChatMessage]
    stream: bool = False
    tools: list[dict[str, Any]] | SkipJsonSchema[None] = None
    reasoning_effort: str | SkipJsonSchema[None] = Field(default=None, examples=["low", "high"])
    reasoning: Reasoning | SkipJsonSchema[None] = None
    stream_options: dict[str, Any] | SkipJsonSchema[None] = None


class ChatCompletion(_Open):
    """The upstream's answer, relayed as it came (OpenAI's chat completion)."""


class ModelEntry(_Closed):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    capabilities: list[str] = Field(
        default_factory=list, description="what the model can do, once probed"
    )


class ModelList(_Closed):
    object: Literal["list"]
    data: list[ModelEntry]


class ShowRequest(_Open):
    model: str | SkipJsonSchema[None] = None
    name: str | SkipJsonSchema[None] = None


class Thinking(_Closed):
    values: list[bool | str]


class Show(_Closed):
    """Ollama's ``/api/show`` answer for one model: what the runtime probes."""

    capabilities: list[str]
    details: dict[str, Any]
    model_info: dict[str, Any]
    thinking: Thinking | SkipJsonSchema[None] = None


class ShowError(_Closed):
    """Ollama's error shape, which ``/api/show`` answers in."""

    error: str


class Health(_Closed):
    ok: Literal[True]


class ModelReadiness(_Closed):
    probed: bool
    capabilities: list[str] | None
    error: str | None


class Readiness(_Closed):
    """Ready when every model was probed; 503 with the same body until then."""

    ready: bool
    models: dict[str, ModelReadiness]
