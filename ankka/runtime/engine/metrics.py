"""Prometheus metrics of one runtime: turns, model calls, tool calls, tokens, latency.

Each runtime has its own registry (tests start many in one process), with prometheus-client's
process collector (``process_*``: CPU, memory, open files, start time). Labels never carry
message text, keys or session ids, and every label set is bounded by what the service declares:
a tool call is counted under the tool's name only when its turn offered a tool of that name (the
agent's declared tools and its MCP servers' listed ones); any name a model invents is counted
under :data:`UNKNOWN_TOOL` (issue 31, item 10: invented names grew the label set without end).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    ProcessCollector,
    generate_latest,
)

from ankka._kernel import genai
from ankka._kernel.exposition import LATENCY_BUCKETS
from ankka.runtime.engine.labelled import Labelled
from ankka.runtime.engine.loop import TurnOutcome
from ankka.runtime.engine.tallies import Tallies
from ankka.runtime.engine.work_metrics import WorkMetrics
from ankka.runtime.records.messages import ModelCall, Usage

__all__ = ["UNKNOWN_TOOL", "RuntimeMetrics"]

UNKNOWN_TOOL = "(unknown)"


class RuntimeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        ProcessCollector(registry=r)
        # The families every turn counts: plain numbers behind one collector (.tallies).
        tallies = Tallies(r)
        self.turns = tallies.counter(
            "ankka_turns", "Turns handled, by agent and outcome", ["agent", "outcome"]
        )
        self.turn_seconds = tallies.histogram(
            "ankka_turn_seconds", "Time of a whole turn", ["agent"], buckets=LATENCY_BUCKETS
        )
        self.model_calls = tallies.counter(
            "ankka_model_calls", "Model calls", ["agent", "provider", "model"]
        )
        self.model_seconds = tallies.histogram(
            "ankka_model_call_seconds",
            "Latency of model calls",
            ["provider", "model"],
            buckets=LATENCY_BUCKETS,
        )
        self.model_retries = Labelled(
            Counter(
                "ankka_model_retries",
                "Model calls made again after a retryable failure (ankka's one retry layer: a "
                "turn's call, or a task's iteration), by the error that caused it",
                ["provider", "model", "kind"],
                registry=r,
            )
        )
        self.tool_calls = tallies.counter(
            "ankka_tool_calls", "Tool calls, by outcome", ["agent", "tool", "outcome"]
        )
        self.caller_disconnects = Counter(
            "ankka_caller_disconnects",
            "Requests whose caller left before sending them whole",
            registry=r,
        )
        self.tokens = tallies.counter(
            "ankka_tokens",
            "Tokens used, by kind (input, output, cache_read, cache_write)",
            ["agent", "provider", "kind"],
        )
        self.judgments = Labelled(
            Counter(
                "ankka_judgments",
                "Judgments answered, by judgment handler",
                ["handler"],
                registry=r,
            )
        )
        self.judgment_tokens = Labelled(
            Counter(
                "ankka_judgment_tokens",
                "Tokens used by judgments (handlers and judged guardrails), by kind",
                ["kind"],
                registry=r,
            )
        )
        genai_labels = [
            genai.prometheus_label(key)
            for key in (genai.OPERATION_NAME, genai.PROVIDER_NAME, genai.REQUEST_MODEL)
        ]
        self.genai_tokens = tallies.histogram(
            genai.prometheus_label(genai.TOKEN_USAGE),
            "Number of input and output tokens used, per model call (OpenTelemetry GenAI)",
            [*genai_labels, genai.prometheus_label(genai.TOKEN_TYPE)],
            buckets=genai.TOKEN_BUCKETS,
        )
        self.genai_duration = tallies.histogram(
            genai.prometheus_label(genai.OPERATION_DURATION),
            "GenAI operation duration: one model call, as accounted (OpenTelemetry GenAI)",
            [*genai_labels, genai.prometheus_label(genai.ERROR_TYPE)],
            unit="seconds",
            buckets=genai.DURATION_BUCKETS,
        )
        tallies.register()
        self.genai_providers: dict[str, str] = {}
        """A configured model's ``gen_ai.provider.name`` (``openai``, ``anthropic``), by its
        name; set by the context that owns the providers."""
        self.work = WorkMetrics(r)
        self.session_cache = Gauge(
            "ankka_session_cache_bytes",
            "Bytes the folds of recent sessions hold (an estimate; bounded by --session-cache-mb)",
            registry=r,
        )

    def watch_session_cache(self, held: Callable[[], float]) -> None:
        """Report ``held()`` as the session cache's bytes, read when scraped."""
        self.session_cache.set_function(held)

    def turn_finished(
        self, agent: str, outcome: TurnOutcome, seconds: float, *, offered: Collection[str]
    ) -> None:
        """Count a finished turn; its tool calls by name when ``offered`` (the names of the
        tools the turn offered) holds the name, else as :data:`UNKNOWN_TOOL`."""
        self.turns.labels(agent, "ok").inc()
        self.turn_seconds.labels(agent).observe(seconds)
        self.calls_made(agent, outcome.calls)
        for result in outcome.tool_results:
            tool = result.name if result.name in offered else UNKNOWN_TOOL
            self.tool_calls.labels(agent, tool, "error" if result.is_error else "ok").inc()

    def calls_made(self, agent: str, calls: Iterable[ModelCall]) -> None:
        """Count model calls and their tokens, whether or not their turn was written."""
        for call in calls:
            self.model_calls.labels(agent, call.provider, call.model).inc()
            self.model_seconds.labels(call.provider, call.model).observe(call.latency_ms / 1000)
            self._genai(call)
            usage = call.usage  # its four counts read directly (no dict made a call)
            for kind, count in (
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
                ("cache_read", usage.cache_read_tokens),
                ("cache_write", usage.cache_write_tokens),
            ):
                if count:
                    self.tokens.labels(agent, call.provider, kind).inc(count)

    def _genai(self, call: ModelCall) -> None:
        kind = self.genai_providers.get(call.provider, "_OTHER")
        tokens = self.genai_tokens
        tokens.labels("chat", kind, call.model, "input").observe(call.usage.input_tokens)
        tokens.labels("chat", kind, call.model, "output").observe(call.usage.output_tokens)
        self.genai_duration.labels("chat", kind, call.model, "").observe(call.latency_ms / 1000)

    def model_retried(self, provider: str, model: str, kind: str) -> None:
        """A model call failed retryably and is made again (providers/retry.py)."""
        self.model_retries.labels(provider, model, kind).inc()

    def caller_left(self) -> None:
        """A caller disconnected before its request arrived whole (a normal event)."""
        self.caller_disconnects.inc()

    def judgment_finished(self, handler: str, usage: Usage) -> None:
        self.judgments.labels(handler).inc()
        self.judgment_tokens_used(usage)

    def judgment_tokens_used(self, usage: Usage) -> None:
        for kind, count in usage.as_dict().items():
            if count:
                self.judgment_tokens.labels(kind.removesuffix("_tokens")).inc(count)

    def turn_failed(self, agent: str, kind: str) -> None:
        self.turns.labels(agent, kind).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
