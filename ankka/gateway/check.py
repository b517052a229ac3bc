"""The pure part of the hot path: read what a request needs, decide, and prepare what is sent.

The gateway forwards bodies it does not own, so it does not validate them whole (the upstream
does that, and a second validator here would only cost time and disagree with it). It reads
exactly what its decisions need: ``model``, ``stream``, whether ``tools`` are declared, the
reasoning effort (``reasoning_effort`` or ``reasoning.effort``) and whether any message carries
an image part. Everything else passes through byte for byte.

Every decision is made on the decoded values, so a key spelt with JSON escapes
(``"\\u0069mage_url"``) is the key it decodes to. The one shortcut, skipping the search for
image parts, is taken only when the raw bytes contain neither ``image`` nor a backslash: a
decoded string can differ from its raw spelling only through an escape, so without one no
image part can exist. A value a decision reads but cannot understand (an effort that is an
object, a part whose ``type`` is not a string) is a 400 naming the field; deeper nesting than
the JSON decoder takes is a 400 ``invalid_json``.

``max_tokens`` (or ``max_completion_tokens``) is read too, when it is a whole number: with the
body's length it bounds what the request may spend, which per-minute token budgets reserve
before sending (:class:`ankka.gateway.callers.TokenBudget`).

Called by :mod:`ankka.gateway.app` once per request; no I/O, so the unit tests are exhaustive.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ankka._kernel.errors import RequestError
from ankka.api.capabilities import ModelCapabilities, missing_for_request

__all__ = ["BadRequest", "Inspected", "Refusal", "forward_body", "inspect", "refusal"]

_IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})
_NO_EFFORT = frozenset({"none"})


class BadRequest(RequestError):
    """The body cannot be routed at all; ``code`` is the OpenAI-style error code."""

    status = 400

    def __init__(self, code: str, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.param = param


@dataclass(frozen=True, slots=True)
class Inspected:
    """What the gateway learned from one Chat Completions body."""

    body: dict[str, Any]
    model: str
    stream: bool
    tools: bool
    effort: str | bool | None
    images: bool
    max_tokens: int | None = None  # max_completion_tokens or max_tokens, when a whole number


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request the model cannot serve: which capability and which request field needs it."""

    capability: str
    param: str


def _may_hold_images(raw: bytes) -> bool:
    """False only when no decoded string of ``raw`` can contain ``image`` (see the docstring)."""
    return b"image" in raw or b"\\" in raw


def _is_image(part: Mapping[str, Any]) -> bool:
    kind = part.get("type")
    if kind is not None and not isinstance(kind, str):
        raise BadRequest(
            "invalid_content_part",
            f"a content part's 'type' must be a string such as 'text' or 'image_url', "
            f"not {type(kind).__name__}",
            param="messages",
        )
    return kind in _IMAGE_PART_TYPES or "image_url" in part


def _has_images(body: Mapping[str, Any]) -> bool:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return False
    found = False
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            continue
        for part in content:
            # Every part is read, so a malformed one is refused wherever it stands.
            if isinstance(part, Mapping) and _is_image(part):
                found = True
    return found


def _effort(body: Mapping[str, Any]) -> str | bool | None:
    effort = body.get("reasoning_effort")
    if effort is None:
        reasoning = body.get("reasoning")
        if isinstance(reasoning, Mapping):
            effort = reasoning.get("effort")
    if effort is None or effort is False:
        return None
    if isinstance(effort, str):
        return None if effort in _NO_EFFORT else effort
    if effort is True:
        return effort
    shown = effort if isinstance(effort, int | float) else type(effort).__name__
    raise BadRequest(
        "invalid_reasoning_effort",
        f"reasoning_effort must be a string such as 'low' or 'high', not {shown!r}",
        param="reasoning_effort",
    )


def inspect(raw: bytes) -> Inspected:
    """Parse a Chat Completions body far enough to route and check it."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(
            "invalid_json", f"the request body is not valid JSON: {exc}; send a JSON object"
        ) from exc
    except RecursionError as exc:
        raise _too_deep() from exc
    if not isinstance(body, dict):
        raise BadRequest("invalid_json", "the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest(
            "missing_model",
            "the request names no model: set 'model' to one of the names GET /v1/models lists",
            param="model",
        )
    tools = body.get("tools") or body.get("functions")
    limit = body.get("max_completion_tokens")
    if limit is None:
        limit = body.get("max_tokens")
    return Inspected(
        body=body,
        model=model,
        stream=body.get("stream") is True,
        tools=bool(tools),
        effort=_effort(body),
        images=_may_hold_images(raw) and _has_images(body),
        # Only read, to bound what the request may spend (a malformed one is the upstream's
        # to refuse, and is then bounded by the model's default).
        max_tokens=limit if type(limit) is int and limit >= 0 else None,
    )


def _too_deep() -> BadRequest:
    return BadRequest(
        "invalid_json",
        "the request body is nested too deeply for the gateway to read; flatten it",
    )


def refusal(caps: ModelCapabilities, request: Inspected) -> Refusal | None:
    """The capability the request needs and the model lacks, or None when it can be served."""
    missing = missing_for_request(
        caps, tools=request.tools, effort=request.effort, images=request.images
    )
    if missing is None:
        return None
    if missing == "tools":
        return Refusal(missing, "tools")
    if missing == "vision":
        return Refusal(missing, "messages")
    return Refusal(missing, "reasoning_effort")


def forward_body(raw: bytes, request: Inspected, *, upstream_model: str) -> bytes:
    """The bytes sent upstream: the caller's, unless the model is renamed or usage is asked for.

    A stream is sent with ``stream_options.include_usage`` so the final chunk carries the token
    counts the metrics need. When the body has no ``stream_options`` at all, the key is spliced
    in before the closing brace instead of re-serialising the whole body.
    """
    body = request.body
    rename = upstream_model != request.model
    options = body.get("stream_options")
    wants_usage = request.stream and not (
        isinstance(options, Mapping) and options.get("include_usage") is True
    )
    if not rename and not wants_usage:
        return raw
    if not rename and options is None:
        end = raw.rstrip()
        if end.endswith(b"}"):
            return end[:-1] + b',"stream_options":{"include_usage":true}}'
    changed = dict(body)
    if rename:
        changed["model"] = upstream_model
    if wants_usage:
        merged = dict(options) if isinstance(options, Mapping) else {}
        merged["include_usage"] = True
        changed["stream_options"] = merged
    try:
        return json.dumps(changed, separators=(",", ":")).encode()
    except RecursionError as exc:  # decoded, but too deep to encode again from here
        raise _too_deep() from exc
