"""The OpenTelemetry SDK's side of :mod:`.tracing`: the tracer provider a configured process
sets as OpenTelemetry's global one. Imported only once tracing is configured (the SDK is the
extra ``tracing``).

The provider exports in batches (OTLP over HTTP, or printed for ``console``), samples as
``OTEL_TRACES_SAMPLER`` says, and quiets the tracers of the libraries the server names whose
work its own spans already stand for (the runtime names the MCP SDK's: see
:mod:`ankka.runtime.features.mcp.spans`). A quieted library's span can be *folded*: what it
would have started with (name, attributes) is handed to the server's function with the span
current then, which may copy what it alone knows (the MCP SDK's JSON-RPC request id) onto it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

if TYPE_CHECKING:
    from ankka._kernel.tracing import Fold

__all__ = ["provider", "tracer"]


class _Folding(trace.NoOpTracer):
    """A quieted library's tracer: it records nothing, but hands each span it is asked for
    (its name and attributes) to ``fold`` with the span current then."""

    def __init__(self, fold: Fold) -> None:
        self._fold = fold

    def start_span(
        self, name: str, context: Context | None = None, *args: Any, **kwargs: Any
    ) -> trace.Span:
        attributes = kwargs.get("attributes") or (args[1] if len(args) > 1 else None)
        self._fold(trace.get_current_span(context), name, dict(attributes or {}))
        return super().start_span(name, context, *args, **kwargs)


class _Provider(TracerProvider):
    """The SDK's provider, with no-op tracers for the instrumentation scopes ``quiet``
    names (folding ones for those ``folds`` names)."""

    def __init__(self, *, quiet: frozenset[str], folds: Mapping[str, Fold], **options: Any) -> None:
        super().__init__(**options)
        self._quiet = quiet
        self._folds = dict(folds)

    def get_tracer(self, instrumenting_module_name: str, *args: Any, **kwargs: Any) -> Any:
        fold = self._folds.get(instrumenting_module_name)
        if fold is not None:
            return _Folding(fold)
        if instrumenting_module_name in self._quiet:
            return trace.NoOpTracer()
        return super().get_tracer(instrumenting_module_name, *args, **kwargs)


def provider(
    service: str,
    version: str,
    *,
    console: bool = False,
    quiet: frozenset[str] = frozenset(),
    folds: Mapping[str, Fold] | None = None,
) -> TracerProvider:
    """A provider exporting to the OTLP endpoint ``OTEL_EXPORTER_OTLP_*`` name (or printing,
    ``console``), set as OpenTelemetry's global one; ``service`` is the ``service.name`` unless
    ``OTEL_SERVICE_NAME`` or ``OTEL_RESOURCE_ATTRIBUTES`` names one."""
    resource = Resource.create({"service.version": version} if version else {})
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": service}))
    # The sampler comes from OTEL_TRACES_SAMPLER.
    made = _Provider(resource=resource, quiet=quiet, folds=folds or {})
    span_exporter: SpanExporter
    if console:
        span_exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter()  # endpoint, headers, timeout: OTEL_EXPORTER_OTLP_*
    made.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(made)
    return made


def tracer(version: str, schema_url: str) -> trace.Tracer:
    """ankka's tracer, of the global provider."""
    return trace.get_tracer("ankka", version or None, schema_url=schema_url)
