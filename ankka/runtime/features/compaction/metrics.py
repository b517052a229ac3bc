"""Compaction's Prometheus metrics, on the runtime's registry. No session ids, no text."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from ankka.runtime.records.compaction import CompactionRecord, HistoryCompacted

__all__ = ["CompactionMetrics"]


class CompactionMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.compactions = Counter(
            "ankka_compactions", "Summaries adopted (sessions compacted)", registry=r
        )
        self.rejections = Counter(
            "ankka_compaction_rejections",
            "Summaries not adopted, by reason",
            ["reason"],
            registry=r,
        )
        self.failures = Counter(
            "ankka_compaction_failures",
            "Summarisations skipped because the summariser failed, by error kind",
            ["kind"],
            registry=r,
        )
        self.chars = Counter(
            "ankka_compaction_chars",
            "Characters of memory as sent, before and after each adopted summary",
            ["when"],
            registry=r,
        )
        self.tokens = Counter(
            "ankka_compaction_tokens",
            "Tokens the summariser used, by kind (input, output, cache_read, cache_write)",
            ["kind"],
            registry=r,
        )

    def recorded(self, record: CompactionRecord) -> None:
        if isinstance(record, HistoryCompacted):
            self.compactions.inc()
            self.chars.labels("before").inc(record.chars_before)
            self.chars.labels("after").inc(record.chars_after)
        else:
            self.rejections.labels(record.reason).inc()
        for kind, count in record.usage.as_dict().items():
            if count:
                self.tokens.labels(kind.removesuffix("_tokens")).inc(count)

    def failed(self, kind: str) -> None:
        self.failures.labels(kind).inc()
