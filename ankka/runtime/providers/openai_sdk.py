"""What of the official ``openai`` SDK the OpenAI-wire transport uses, in the one module that
imports it (:mod:`.openai_transport` imports this at its first call, not at start).

The client keeps each URL it has joined to its base URL (:class:`Client`: the SDK parses and
joins it again on every call, about a tenth of its own time per call); :func:`translate_error`
turns the SDK's exceptions into errors naming the provider the service configured, never the
SDK's vendor.
"""

from __future__ import annotations

import httpx2
import openai
from openai import AsyncStream, OpenAIError

from ankka._kernel.errors import ModelError
from ankka.runtime.providers.failures import for_status, summarize_body, timed_out, unreachable

__all__ = ["AsyncStream", "Client", "OpenAIError", "translate_error"]

_JOINED = 32  # URLs kept per client: a provider posts to one or two paths


class Client(openai.AsyncOpenAI):
    """The official client, keeping the URLs it joined to its base URL (a few paths)."""

    _joined: dict[str, httpx2.URL]
    _joined_to: httpx2.URL | None = None

    def _prepare_url(self, url: str) -> httpx2.URL:
        base = self.base_url
        if base is not self._joined_to or len(self._joined) >= _JOINED:
            self._joined, self._joined_to = {}, base  # new, the base URL was set, or full
        joined = self._joined.get(url)
        if joined is None:
            joined = self._joined[url] = super()._prepare_url(url)
        return joined


def translate_error(provider: str, exc: OpenAIError, timeout: float) -> ModelError:
    """Map an SDK exception to ankka's error for ``provider``, keeping the SDK's words out."""
    if isinstance(exc, openai.APITimeoutError):
        return timed_out(provider, timeout)
    if isinstance(exc, openai.APIConnectionError):
        return unreachable(provider, exc.__cause__)
    if isinstance(exc, openai.APIStatusError):
        return for_status(provider, exc.status_code, summarize_body(exc.response))
    if isinstance(exc, openai.APIError):
        body = exc.body if isinstance(exc.body, dict) else {}
        detail = str(body.get("message") or "no detail")[:300]
        return ModelError(provider, f"the server reported an error mid-stream: {detail}")
    return ModelError(provider, type(exc).__name__)
