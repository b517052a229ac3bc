"""The words every provider fails with, whatever SDK it rides on.

Each adapter translates its SDK's exceptions in one place (its ``translate_error``); the
classification of an HTTP status, the summary of an error body and the wording of a timeout
live here so that a failing Anthropic, Responses, Chat Completions or installation model
reads the same, and names the provider the service configured, never the SDK's vendor.
Pure functions; no I/O beyond reading a response body already received.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ankka._kernel.errors import (
    AnkkaError,
    ModelAuthenticationError,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
)
from ankka._kernel.redact import redact

__all__ = [
    "StreamFailed",
    "deadline",
    "for_status",
    "summarize_body",
    "summarize_text",
    "timed_out",
    "unreachable",
]

_LIMIT = 300


class StreamFailed(ModelError):
    """The server said the answer failed: a Responses ``response.failed`` or ``error`` event,
    an Anthropic ``error`` event mid-stream. The wire readers raise it without knowing the
    provider; each adapter translates it into a :class:`ModelError` naming the provider. A
    model error itself (the model's provider failed), whose message is the server's detail."""

    kind = "model_error"
    status = 502

    def __init__(self, detail: str) -> None:
        detail = redact(detail)
        AnkkaError.__init__(self, detail)
        self.provider = ""
        self.detail = detail
        self.http_status = None


def summarize_text(text: str) -> str:
    """The error's own message when the body is a JSON error, else the text, cut short."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            text = str(error["message"])
        elif isinstance(error, str):
            text = error
        elif data.get("message"):
            text = str(data["message"])
    text = " ".join(text.split())
    if not text:
        return "empty body"
    return text[:_LIMIT] + ("…" if len(text) > _LIMIT else "")


def summarize_body(response: Any) -> str:
    """Summarize an ``httpx2.Response`` (or anything with ``.text``) that may be unread."""
    if response is None:
        return "no body"
    try:
        text = response.text
    except Exception:  # an unread streamed body: its text is not available
        return "body not read"
    return summarize_text(str(text))


def for_status(provider: str, status: int, summary: str) -> ModelError:
    """Classify an HTTP error status by who must act."""
    if status in (401, 403):
        return ModelAuthenticationError(
            provider,
            f"the server refused the credentials: {summary}; check the model's API key",
            http_status=status,
        )
    if status in (408, 504):
        return ModelTimeout(provider, f"the server timed out: {summary}", http_status=status)
    if status in (429, 529) or status >= 500:
        return ModelUnavailable(
            provider, f"the server is unavailable: {summary}", http_status=status
        )
    return ModelError(provider, f"the server refused the request: {summary}", http_status=status)


def timed_out(provider: str, timeout: float) -> ModelTimeout:
    return ModelTimeout(
        provider,
        f"no answer within the model timeout of {timeout:g}s; raise the model's TIMEOUT "
        "setting if the model is slow",
    )


def unreachable(provider: str, cause: BaseException | None) -> ModelUnavailable:
    reason = f"{type(cause).__name__}: {cause}" if cause else "connection failed"
    return ModelUnavailable(provider, f"cannot reach the server ({reason})")


@asynccontextmanager
async def deadline(provider: str, seconds: float) -> AsyncIterator[None]:
    """One deadline over a whole request to the model (the SDK's read timeout applies to
    each read, so a server trickling bytes could otherwise outlast the model timeout). The
    SDKs retry nothing (:mod:`.retry`)."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError as exc:
        raise timed_out(provider, seconds) from exc
