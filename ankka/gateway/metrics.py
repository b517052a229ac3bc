"""The gateway's Prometheus metrics, per model and caller identity.

Who used which model, how much, and what went wrong: requests, refusals by reason, upstream
errors by kind, latency, and prompt/completion tokens read from the upstream's own usage. The
caller is the identity in the client certificate (``namespace/agent``), ``anonymous`` when the
gateway runs without TLS. A model name a caller made up is counted as ``(unknown)`` so callers
cannot grow the label set. Labels never carry message text or keys.

Beside them, OpenTelemetry's GenAI client metrics for each upstream call, named and bucketed
as the conventions say (:mod:`ankka._kernel.genai`): ``gen_ai_client_token_usage`` (tokens by
``gen_ai_token_type``) and ``gen_ai_client_operation_duration_seconds`` (``error_type`` set
when the call failed), labelled by operation, provider and request model; and the
``process_*`` metrics of prometheus-client's process collector.

Label lookups are cached per (model, caller): the request path pays a dict lookup, not
prometheus-client's label resolution.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)

from ankka._kernel import genai
from ankka._kernel.exposition import CONTENT_TYPE, LATENCY_BUCKETS

__all__ = [
    "CONTENT_TYPE",
    "PROVIDER_NAMES",
    "UNKNOWN_MODEL",
    "GatewayMetrics",
    "GenAIMetrics",
    "ModelCallerMetrics",
]

# gen_ai.provider.name for each kind of upstream: ``openai`` is the conventions' own value
# (any OpenAI-compatible server declared by hand); the other two are ankka's names.
PROVIDER_NAMES = {"openai": "openai", "ollama": "ollama", "llamacpp": "llama_cpp"}

_GENAI_LABELS = [
    genai.prometheus_label(key)
    for key in (genai.OPERATION_NAME, genai.PROVIDER_NAME, genai.REQUEST_MODEL)
]

UNKNOWN_MODEL = "(unknown)"


@dataclass(frozen=True, slots=True)
class ModelCallerMetrics:
    """The children of each metric for one (model, caller) pair."""

    requests: Counter
    latency: Histogram
    prompt_tokens: Counter
    completion_tokens: Counter


@dataclass(frozen=True, slots=True)
class GenAIMetrics:
    """The GenAI client metrics' children for one upstream model (operation ``chat``)."""

    input_tokens: Histogram
    output_tokens: Histogram
    duration: Histogram  # calls that succeeded (error_type empty)
    _duration: Histogram  # the parent, for a call that failed
    _labels: tuple[str, str, str]

    def failed(self, error_type: str) -> Histogram:
        return self._duration.labels(*self._labels, error_type)


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self._requests = Counter(
            "ankka_gateway_requests", "Chat requests received", ["model", "caller"], registry=r
        )
        self._refusals = Counter(
            "ankka_gateway_refusals",
            "Requests refused before reaching a model, by reason",
            ["model", "caller", "reason"],
            registry=r,
        )
        self._upstream_errors = Counter(
            "ankka_gateway_upstream_errors",
            "Upstream failures (unavailable, timeout, protocol, http_5xx), by kind",
            ["model", "caller", "kind"],
            registry=r,
        )
        self._latency = Histogram(
            "ankka_gateway_request_seconds",
            "Time from request to the last byte of the answer, for requests sent upstream",
            ["model", "caller"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self._prompt = Counter(
            "ankka_gateway_prompt_tokens",
            "Prompt tokens, from usage",
            ["model", "caller"],
            registry=r,
        )
        self._completion = Counter(
            "ankka_gateway_completion_tokens",
            "Completion tokens, from usage",
            ["model", "caller"],
            registry=r,
        )
        self._caller_left = Counter(
            "ankka_gateway_caller_disconnects",
            "Streams the caller left before the end (the upstream request was cancelled)",
            ["model", "caller"],
            registry=r,
        )
        self.in_flight = Gauge(
            "ankka_gateway_in_flight", "Requests being answered by a model", ["model"], registry=r
        )
        self._token_usage = Histogram(
            genai.prometheus_label(genai.TOKEN_USAGE),
            "Number of input and output tokens used, per upstream call (OpenTelemetry GenAI)",
            [*_GENAI_LABELS, genai.prometheus_label(genai.TOKEN_TYPE)],
            buckets=genai.TOKEN_BUCKETS,
            registry=r,
        )
        self._operation_duration = Histogram(
            genai.prometheus_label(genai.OPERATION_DURATION),
            "GenAI operation duration: one upstream call, to its answer's last byte "
            "(OpenTelemetry GenAI)",
            [*_GENAI_LABELS, genai.prometheus_label(genai.ERROR_TYPE)],
            unit="seconds",
            buckets=genai.DURATION_BUCKETS,
            registry=r,
        )
        ProcessCollector(registry=r)
        self._cache: dict[tuple[str, str], ModelCallerMetrics] = {}
        self._genai: dict[tuple[str, str, str], GenAIMetrics] = {}
        self._in_flight: dict[str, Gauge] = {}

    def genai_of(self, provider: str, model: str, operation: str = "chat") -> GenAIMetrics:
        """The GenAI metrics of calls to ``model`` (as sent upstream) at ``provider``."""
        key = (operation, provider, model)
        found = self._genai.get(key)
        if found is None:
            found = GenAIMetrics(
                self._token_usage.labels(*key, "input"),
                self._token_usage.labels(*key, "output"),
                self._operation_duration.labels(*key, ""),
                self._operation_duration,
                key,
            )
            self._genai[key] = found
        return found

    def in_flight_of(self, model: str) -> Gauge:
        found = self._in_flight.get(model)
        if found is None:
            found = self._in_flight[model] = self.in_flight.labels(model)
        return found

    def of(self, model: str, caller: str) -> ModelCallerMetrics:
        key = (model, caller)
        found = self._cache.get(key)
        if found is None:
            found = ModelCallerMetrics(
                self._requests.labels(model, caller),
                self._latency.labels(model, caller),
                self._prompt.labels(model, caller),
                self._completion.labels(model, caller),
            )
            self._cache[key] = found
        return found

    def refused(self, model: str, caller: str, reason: str) -> None:
        self._refusals.labels(model, caller, reason).inc()

    def upstream_error(self, model: str, caller: str, kind: str) -> None:
        self._upstream_errors.labels(model, caller, kind).inc()

    def caller_left(self, model: str, caller: str) -> None:
        self._caller_left.labels(model, caller).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
