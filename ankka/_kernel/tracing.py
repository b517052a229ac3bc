"""Traces: OpenTelemetry's SDK, exporting over OTLP, off unless the ``OTEL_*`` environment asks.

Who calls it: each server's command (``ankka serve``, ``ankka gateway``) calls
:func:`from_environment` once at start and hands the tracer it returns (or ``None``) to what it
serves; :class:`ServerSpans` wraps an ASGI app in one SERVER span per request, continuing the
caller's W3C ``traceparent``; :func:`inject` writes the current span's context into an outgoing
request. When tracing is off nothing of OpenTelemetry is imported and the servers pay one
``is None`` test per request (docs/observability.md).

Configuration is OpenTelemetry's own, read by the SDK itself: ``OTEL_EXPORTER_OTLP_ENDPOINT``
(or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) turns tracing on; ``OTEL_TRACES_EXPORTER`` chooses
``otlp`` (HTTP/protobuf), ``console`` (spans printed as JSON, for a look) or ``none``;
``OTEL_SDK_DISABLED=true`` turns it off whatever else is set; ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*`` and ``OTEL_PROPAGATORS``
mean what the specification says. The SDK is the extra ``tracing``; a configured environment
without it is refused at start, naming the extra.

``_kernel`` imports nothing heavy at import time: OpenTelemetry is imported only once tracing
is configured.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ankka._kernel.errors import ConfigurationError

if TYPE_CHECKING:
    from opentelemetry.propagators.textmap import Getter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "SCHEMA_URL",
    "SEMCONV_VERSION",
    "Fold",
    "ServerSpans",
    "Tracing",
    "active",
    "capture_content",
    "carrier",
    "continued",
    "enabled_by",
    "from_environment",
    "header_lines",
    "inject",
    "trace_ids",
]

SEMCONV_VERSION = "1.41.0"
"""The OpenTelemetry semantic conventions ankka's spans and GenAI metrics follow (GenAI status:
Development): span names, attribute names and metric names are those of this version."""
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# Whether this process configured tracing (from_environment): OpenTelemetry's provider is
# process-global too, and the clients that send the context (header_lines) ask this first.
_on = False

_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_EXPORTERS = ("otlp", "console", "none")
_HTTP = ("http/protobuf", "")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
                   Awaitable[None]]  # fmt: skip


def _exporter(environ: Mapping[str, str]) -> str:
    """The exporter the environment asks for: ``otlp``, ``console`` or ``none``."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return "none"
    chosen = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not chosen:
        return "otlp" if any(environ.get(name, "").strip() for name in _ENDPOINTS) else "none"
    names = [name.strip() for name in chosen.split(",") if name.strip()]
    unknown = [name for name in names if name not in _EXPORTERS]
    if unknown or len(names) != 1:
        raise ConfigurationError(
            f"OTEL_TRACES_EXPORTER={chosen[:60]!r}: ankka exports traces with one of "
            f"{', '.join(_EXPORTERS)}"
        )
    return names[0]


def active() -> bool:
    """Whether this process traces (:func:`from_environment` configured it): what a client
    asks before it spends anything on a trace context."""
    return _on


def enabled_by(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` turns tracing on (a ConfigurationError names a value it refuses)."""
    return _exporter(environ) != "none"


@dataclass(frozen=True, slots=True)
class Tracing:
    """The process's tracer provider (set as OpenTelemetry's global one) and ankka's tracer."""

    provider: TracerProvider
    tracer: Tracer

    def shutdown(self) -> None:
        """Export what is still buffered, then stop: called once as the server exits."""
        self.provider.shutdown()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ankka")
    except PackageNotFoundError:
        return ""


Fold = Callable[["Span", str, dict[str, Any]], None]
"""What a server does with a span a quieted library would have started: called with the span
current then, the library's span name and its start attributes (:func:`from_environment`)."""


def from_environment(
    service: str,
    environ: Mapping[str, str] | None = None,
    *,
    quiet: Iterable[str] = (),
    folds: Mapping[str, Fold] | None = None,
) -> Tracing | None:
    """The tracing ``environ`` (default: the process's) configures, or ``None`` when it is off.

    ``service`` is the ``service.name`` used unless ``OTEL_SERVICE_NAME`` or
    ``OTEL_RESOURCE_ATTRIBUTES`` names one. ``quiet`` names libraries' instrumentation scopes
    whose spans are not made (the server's own spans describe that work); ``folds``, by scope,
    quiets a library's spans too, handing each to a :data:`Fold` instead. Raises
    :class:`ConfigurationError` naming the setting or the missing extra.
    """
    env = os.environ if environ is None else environ
    exporter = _exporter(env)
    if exporter == "none":
        return None
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", ""
    )
    if exporter == "otlp" and protocol.strip().lower() not in _HTTP:
        raise ConfigurationError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol[:40]!r}: ankka exports OTLP over HTTP "
            "(http/protobuf, a collector's port 4318); unset it or set http/protobuf"
        )
    try:
        from ankka._kernel import tracing_sdk
    except ImportError:
        raise ConfigurationError(
            "tracing is configured (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_TRACES_EXPORTER) but "
            "OpenTelemetry's SDK is not installed: pip install 'ankka[tracing]'"
        ) from None
    version = _version()
    provider = tracing_sdk.provider(
        service, version, console=exporter == "console", quiet=frozenset(quiet), folds=folds
    )
    global _on
    _on = True
    return Tracing(provider, tracing_sdk.tracer(version, SCHEMA_URL))


class _ScopeHeaders:
    """OpenTelemetry's getter over an ASGI scope's header list (lower-case names as bytes);
    shaped as its ``Getter`` (not derived from it: that would import OpenTelemetry here)."""

    def get(self, carrier: Iterable[tuple[bytes, bytes]], key: str) -> list[str] | None:
        wanted = key.lower().encode("latin-1")
        found = [value.decode("latin-1") for name, value in carrier if name == wanted]
        return found or None

    def keys(self, carrier: Iterable[tuple[bytes, bytes]]) -> list[str]:
        return [name.decode("latin-1") for name, _ in carrier]


_GETTER = _ScopeHeaders()


def inject() -> list[tuple[str, str]]:
    """The current context's propagation headers (``traceparent``, ``tracestate``, baggage),
    by OpenTelemetry's configured propagators; empty when tracing is off or nothing is
    current."""
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return list(carrier.items())


def header_lines() -> bytes:
    """The current context's propagation headers as request header lines (each ending in
    CRLF), for a client that writes its own request head; ``b""`` when tracing is off."""
    if not _on:
        return b""
    lines = [
        f"{name}: {value}\r\n".encode("latin-1")
        for name, value in inject()
        if "\r" not in value and "\n" not in value
    ]
    return b"".join(lines)


def carrier() -> dict[str, str]:
    """The current context as W3C headers (``traceparent``, ``tracestate``, ``baggage``), to
    record with a task; ``{}`` when OpenTelemetry was never imported (tracing off) or nothing
    is current."""
    import sys

    if "opentelemetry.trace" not in sys.modules:
        return {}
    return dict(inject())


_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CONTENT_ON = ("true", "span_only", "span_and_event")
_CONTENT_OFF = ("", "false", "no_content", "event_only")


def capture_content(environ: Mapping[str, str] | None = None) -> bool:
    """Whether spans record message content (instructions, messages, tool arguments and
    results): ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (off by default);
    a value it is not is refused, naming the choices."""
    env = os.environ if environ is None else environ
    value = env.get(_CONTENT, "").strip().lower()
    if value in _CONTENT_ON:
        return True
    if value in _CONTENT_OFF:
        return False
    raise ConfigurationError(
        f"{_CONTENT}={value[:40]!r}: ankka records message content on spans with true, "
        "and leaves it out with false (the default)"
    )


@contextmanager
def continued(recorded: Mapping[str, str]) -> Iterator[None]:
    """Inside, the recorded context ``recorded`` (W3C headers, as :func:`carrier` gave them) is
    current, so what is sent in it carries it on; nothing changes when it is empty (always, with
    tracing off: nothing is recorded then)."""
    if not recorded:
        yield
        return
    from opentelemetry import context, propagate

    token = context.attach(propagate.extract(dict(recorded)))
    try:
        yield
    finally:
        context.detach(token)


def trace_ids() -> tuple[str, str] | None:
    """(trace id, span id) of the current span in hex, or ``None`` outside a recorded span.

    Imports nothing when OpenTelemetry was never imported (tracing off), so a log line costs
    a dictionary lookup."""
    import sys

    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


class ServerSpans:
    """An ASGI app in one SERVER span per HTTP request, continuing the caller's trace context.

    The span is named ``METHOD ROUTE`` (the route template where the app's router sets
    ``scope["route"]``, else the path when ``route`` says it is one of a fixed set, else the
    method alone), with the HTTP conventions' attributes and ``ankka.caller`` when the app's
    identity step put one in the scope. It is current while the app runs, so the app's own
    spans and its outgoing requests (:func:`inject`) join the caller's trace.
    """

    def __init__(
        self,
        app: ASGIApp,
        tracer: Tracer,
        *,
        routes: Iterable[str] = (),
        untraced: Iterable[str] = ("/healthz", "/readyz", "/metrics"),
        caller_key: str = "ankka.caller",
    ) -> None:
        from opentelemetry import context, propagate, trace

        self.app = app
        self._tracer = tracer
        self._routes = frozenset(routes)
        self._untraced = frozenset(untraced)
        self._caller_key = caller_key
        self._extract = propagate.extract
        self._attach = context.attach
        self._detach = context.detach
        self._in_context = trace.set_span_in_context
        self._server = trace.SpanKind.SERVER
        self._error = trace.StatusCode.ERROR

    async def __call__(
        self,
        scope: Scope,
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http" or scope.get("path") in self._untraced:
            await self.app(scope, receive, send)
            return
        # Started with its attributes in one dict and attached directly (no context manager):
        # what a span costs is the SDK's work per call (docs/benchmarks.md).
        getter = cast("Getter[Iterable[tuple[bytes, bytes]]]", _GETTER)
        method = str(scope.get("method", "GET"))
        attributes = {
            "http.request.method": method,
            "url.path": str(scope.get("path", "")),
            "url.scheme": str(scope.get("scheme", "http")),
        }
        # Exceptions are not recorded as events (their text may quote a secret): _finish sets
        # error.type to the exception's type instead.
        span = self._tracer.start_span(
            method,
            context=self._extract(scope.get("headers", ()), getter=getter),
            kind=self._server,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
        token = self._attach(self._in_context(span))
        status: list[int] = []

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        failure: str | None = None
        try:
            await self.app(scope, receive, sending)
        except BaseException as exc:
            # The type only: an exception's text may quote what it was given.
            failure = type(exc).__qualname__
            raise
        finally:
            try:
                if span.is_recording():
                    self._finish(span, scope, method, status[0] if status else None, failure)
            finally:
                self._detach(token)
                span.end()

    def _finish(
        self, span: Span, scope: Scope, method: str, status: int | None, failure: str | None
    ) -> None:
        found: dict[str, str | int] = {}
        route = getattr(scope.get("route"), "path", None)
        if route is None and scope.get("path") in self._routes:
            route = scope["path"]
        if route is not None:
            span.update_name(f"{method} {route}")
            found["http.route"] = str(route)
        caller = scope.get(self._caller_key)
        if isinstance(caller, str):
            found["ankka.caller"] = caller
        if status is not None:
            found["http.response.status_code"] = status
        if failure is not None and failure != "CancelledError":
            found["error.type"] = failure
        elif status is not None and status >= 500:
            found["error.type"] = str(status)
        span.set_attributes(found)
        if "error.type" in found:
            span.set_status(self._error)
