"""The gateway's own spans: the check, a refusal, and the upstream call.

Made only when tracing is on (``ankka gateway`` found it configured, :mod:`ankka._kernel.tracing`);
the gateway holds ``None`` instead of a :class:`GatewaySpans` otherwise and imports nothing of
OpenTelemetry. Under the request's SERVER span (:class:`ankka._kernel.tracing.ServerSpans`,
which continues the caller's ``traceparent``):

- ``ankka.gateway.check`` (INTERNAL): reading the body and deciding (format, model, caller,
  capabilities); ``ankka.gateway.forwarded`` says whether the request went on;
- ``ankka.gateway.refusal`` (INTERNAL): answering a refusal, with its reason, code, status and
  message (no secret is ever in one: they name models, callers and capabilities);
- ``chat {model}`` (CLIENT, the GenAI conventions' inference span): the upstream call, whose
  request carries the trace context in ``traceparent``, with ``gen_ai.*`` attributes and the
  token counts the upstream reported.

Spans never record exceptions' text (an upstream's words may quote a key): a failure is
``error.type``, the gateway's kind for it (``unavailable``, ``timeout``, ``protocol``,
``too_large``) or the upstream's HTTP status.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ankka._kernel import genai, tracing
from ankka.gateway.forward import Exchange

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

__all__ = ["GatewaySpans"]

_MESSAGE_LIMIT = 512  # a refusal's message on its span (it may quote the caller's model name)


class GatewaySpans:
    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    @contextmanager
    def check(self) -> Iterator[Span]:
        with self._tracer.start_as_current_span(
            "ankka.gateway.check", record_exception=False, set_status_on_exception=False
        ) as span:
            yield span

    @contextmanager
    def refusal(
        self, *, model: str, caller: str, reason: str, code: str, status: int, message: str
    ) -> Iterator[Span]:
        attributes: dict[str, str | int] = {
            "ankka.gateway.model": model,
            "ankka.caller": caller,
            "ankka.gateway.refusal.reason": reason,
            "ankka.gateway.refusal.code": code,
            "ankka.gateway.refusal.message": message[:_MESSAGE_LIMIT],
            "http.response.status_code": status,
        }
        with self._tracer.start_as_current_span(
            "ankka.gateway.refusal",
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            yield span

    async def upstream(self, exchange: Exchange, *, provider: str) -> None:
        """Run ``exchange`` in its ``chat`` CLIENT span, its request carrying the context."""
        from opentelemetry.trace import SpanKind

        spec = exchange.spec
        endpoint = exchange.endpoint
        attributes: dict[str, str | int | bool] = {
            genai.OPERATION_NAME: "chat",
            genai.PROVIDER_NAME: provider,
            genai.REQUEST_MODEL: spec.upstream_model,
            genai.REQUEST_STREAM: exchange.stream,
            genai.SERVER_ADDRESS: endpoint.host,
            genai.SERVER_PORT: endpoint.port,
            "ankka.gateway.model": spec.name,
            "ankka.caller": exchange.caller,
        }
        with self._tracer.start_as_current_span(
            genai.chat_span_name(spec.upstream_model),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            exchange.headers = tracing.header_lines()
            try:
                await exchange.run()
            finally:
                if span.is_recording():
                    _answered(span, exchange)


def _answered(span: Span, exchange: Exchange) -> None:
    """What the upstream answered, on its span in one call: the status, the token counts, and
    the failure (or the caller's leaving)."""
    from opentelemetry.trace import StatusCode

    found: dict[str, str | int | bool] = {}
    if exchange.status is not None:
        found["http.response.status_code"] = exchange.status
    if exchange.prompt_tokens is not None:
        found[genai.INPUT_TOKENS] = exchange.prompt_tokens
    if exchange.completion_tokens is not None:
        found[genai.OUTPUT_TOKENS] = exchange.completion_tokens
    if exchange.caller_left:
        found["ankka.gateway.caller_left"] = True
    elif exchange.failure is not None:
        found[genai.ERROR_TYPE] = exchange.failure
    span.set_attributes(found)
    if genai.ERROR_TYPE in found:
        span.set_status(StatusCode.ERROR)
