"""The Anthropic Messages provider, over the official ``anthropic`` SDK as transport only.

ankka builds the request bytes and reads the answers itself (:mod:`.anthropic_wire`); the
SDK brings retries, SSE framing and the ``x-api-key`` and version headers, over ankka's lean
HTTP transport (:mod:`.lean_http`). Its exceptions are translated here, in one place, into
errors naming the provider the service configured. The SDK is an optional extra
(``ankka[anthropic]``): a configured Anthropic model checks at start that it is installed,
and imports it, and builds its client, at the model's first call, on the event loop's thread
that makes it (``ankka serve`` listens without spending that import: docs/benchmarks.md).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ankka._kernel.errors import ConfigurationError, ModelError
from ankka.runtime.providers.anthropic_wire import (
    StreamAccumulator,
    encode_request,
    read_response,
)
from ankka.runtime.providers.base import ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.failures import (
    StreamFailed,
    deadline,
    for_status,
    summarize_body,
    summarize_text,
    timed_out,
    unreachable,
)
from ankka.runtime.providers.prefixes import EncodedPrefixes

if TYPE_CHECKING:
    import anthropic

__all__ = ["DEFAULT_MAX_TOKENS", "DEFAULT_URL", "AnthropicProvider", "translate_error"]

DEFAULT_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 4096
_JSON = {"Content-Type": "application/json"}


def _installed() -> None:
    """Refuse, at configuration, an Anthropic model without the SDK (no import: cheap)."""
    if importlib.util.find_spec("anthropic") is None:
        raise ConfigurationError(
            "an Anthropic model is configured but the anthropic SDK is not installed: "
            "install ankka with its extra, pip install 'ankka[anthropic]'"
        )


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise ConfigurationError(
            "an Anthropic model is configured but the anthropic SDK is not installed: "
            "install ankka with its extra, pip install 'ankka[anthropic]'"
        ) from exc
    return anthropic


class AnthropicProvider:
    gen_ai_provider = "anthropic"  # gen_ai.provider.name on its spans

    def __init__(
        self,
        *,
        name: str,
        model: str,
        api_key: str,
        base_url: str = DEFAULT_URL,
        timeout: float = 120.0,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_retries: int = 0,  # ankka retries (providers/retry.py), never the SDK too
    ) -> None:
        _installed()
        self._name = name
        self._model = model
        self.timeout = timeout
        self.max_tokens = max_tokens
        self._encoded = EncodedPrefixes()  # a session's sent prefix, spliced into its next
        self._settings = (api_key, base_url.rstrip("/"), max_retries)
        self._built: anthropic.AsyncAnthropic | None = None

    @property
    def _sdk(self) -> Any:
        return _sdk()  # imported by the first _client already: a lookup in sys.modules

    @property
    def _client(self) -> anthropic.AsyncAnthropic:
        """The SDK's client, built (and ``anthropic`` imported) at the first call."""
        if self._built is None:
            import httpx2

            from ankka.runtime.providers.lean_http import lean_client

            api_key, base_url, max_retries = self._settings
            limits = httpx2.Timeout(self.timeout, connect=min(self.timeout, 10.0))
            self._built = _sdk().AsyncAnthropic(
                api_key=api_key,
                base_url=base_url,
                timeout=limits,
                max_retries=max_retries,
                http_client=lean_client(limits),
            )
        return self._built

    @property
    def name(self) -> str:
        return self._name

    @property
    def model(self) -> str:
        return self._model

    def __repr__(self) -> str:
        return f"AnthropicProvider(name={self._name!r}, model={self._model!r})"

    def _body(self, request: ModelRequest, *, stream: bool) -> bytes:
        return encode_request(
            request,
            model=self._model,
            max_tokens=self.max_tokens,
            stream=stream,
            memo=self._encoded,
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        import httpx2

        body = self._body(request, stream=False)
        client = self._client
        try:
            async with deadline(self._name, self.timeout):
                response = await client.post(
                    "/v1/messages",
                    cast_to=httpx2.Response,
                    content=body,
                    options={"headers": _JSON},
                )
                data = json.loads(await response.aread())
        except self._sdk.AnthropicError as exc:
            raise translate_error(self._name, exc, self.timeout) from exc
        except ValueError as exc:
            raise ModelError(self._name, "the server did not answer JSON") from exc
        try:
            return read_response(data, model=self._model)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelError(self._name, f"the answer is not a Messages answer: {exc}") from exc

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        body = self._body(request, stream=True)
        accumulator = StreamAccumulator(self._model)
        client = self._client
        try:
            async with deadline(self._name, self.timeout):
                events = await client.post(
                    "/v1/messages",
                    cast_to=dict[str, Any],
                    content=body,
                    options={"headers": _JSON},
                    stream=True,
                    stream_cls=self._sdk.AsyncStream[dict[str, Any]],
                )
            async with events:
                async for event in events:
                    text = accumulator.add(event)
                    if text:
                        yield TextDelta(text)
        except self._sdk.AnthropicError as exc:
            raise translate_error(self._name, exc, self.timeout) from exc
        except StreamFailed as exc:
            raise ModelError(self._name, f"the server reported an error mid-stream: {exc}") from exc
        yield accumulator.result()

    async def aclose(self) -> None:
        if self._built is not None:  # never called: nothing was opened
            await self._built.close()


def translate_error(provider: str, exc: BaseException, timeout: float) -> ModelError:
    """Map an ``anthropic`` SDK exception to ankka's error for ``provider``."""
    sdk = _sdk()
    if isinstance(exc, sdk.APITimeoutError):
        return timed_out(provider, timeout)
    if isinstance(exc, sdk.APIConnectionError):
        return unreachable(provider, exc.__cause__)
    if isinstance(exc, sdk.APIStatusError):
        if exc.status_code < 400:
            # An ``error`` event inside a stream that had started well (HTTP 200).
            body = exc.body if isinstance(exc.body, dict) else {}
            detail = summarize_text(json.dumps(body)) if body else "no detail"
            return ModelError(provider, f"the server reported an error mid-stream: {detail}")
        return for_status(provider, exc.status_code, summarize_body(exc.response))
    return ModelError(provider, f"the call failed ({type(exc).__name__})")
