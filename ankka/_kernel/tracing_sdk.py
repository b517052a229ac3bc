"""The OpenTelemetry SDK's side of :mod:`.tracing`: the tracer provider a configured process
sets as OpenTelemetry's global one. Imported only once tracing is configured (the SDK is the
extra ``tracing``).

The provider exports in batches (OTLP over HTTP, or printed for ``console``), samples as
``OTEL_TRACES_SAMPLER`` says, and quiets the tracers of the libraries the server names whose
work its own spans already stand for (the runtime names the MCP SDK's: see
:mod:`ankka.runtime.features.mcp.spans`).
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

__all__ = ["provider", "tracer"]


class _Provider(TracerProvider):
    """The SDK's provider, with no-op tracers for the instrumentation scopes ``quiet``
    names."""

    def __init__(self, *, quiet: frozenset[str], **options: Any) -> None:
        super().__init__(**options)
        self._quiet = quiet

    def get_tracer(self, instrumenting_module_name: str, *args: Any, **kwargs: Any) -> Any:
        if instrumenting_module_name in self._quiet:
            return trace.NoOpTracer()
        return super().get_tracer(instrumenting_module_name, *args, **kwargs)


def provider(
    service: str, version: str, *, console: bool = False, quiet: frozenset[str] = frozenset()
) -> TracerProvider:
    """A provider exporting to the OTLP endpoint ``OTEL_EXPORTER_OTLP_*`` name (or printing,
    ``console``), set as OpenTelemetry's global one; ``service`` is the ``service.name`` unless
    ``OTEL_SERVICE_NAME`` or ``OTEL_RESOURCE_ATTRIBUTES`` names one."""
    resource = Resource.create({"service.version": version} if version else {})
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": service}))
    made = _Provider(resource=resource, quiet=quiet)  # the sampler comes from OTEL_TRACES_SAMPLER
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
