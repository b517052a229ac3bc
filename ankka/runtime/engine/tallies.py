"""Counters and histograms for the metrics every turn counts, kept as plain numbers.

A request turn counts about twenty series (its turn, each model call's latency, tokens and
the GenAI histograms, each tool call). Through prometheus-client each count takes a lock, and a
histogram's ``observe`` walks its buckets one by one and takes two: that was a fifteenth of a
turn's instructions (issue 23, Speed). These keep each series' figures in plain attributes,
updated on the event loop's thread (the only one that counts them), and are exposed through
one registered collector as the same families, series and samples prometheus-client's
``Counter`` and ``Histogram`` expose (``_total``/``_created``; ``_bucket``/``_count``/``_sum``/
``_created``), so a scrape cannot tell them apart (tests/unit/runtime/engine/test_tallies.py).
A scrape from another thread reads each number whole (the interpreter's lock); like
prometheus-client's, a histogram read while it is observed may show a bucket ahead of its sum.

Used by :class:`~ankka.runtime.engine.metrics.RuntimeMetrics` for its per-turn families only;
everything else stays prometheus-client's own.
"""

from __future__ import annotations

import math
import os
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import cast

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

__all__ = ["Count", "CountFamily", "Histogram", "HistogramFamily", "Tallies"]

_CREATED = os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "False").lower() not in (
    "true",
    "1",
    "t",
)
"""prometheus-client's own switch for the ``_created`` samples, read the same way."""

_le_label = cast(Callable[[float], str], floatToGoString)
"""A bucket's ``le`` as prometheus-client writes it (``+Inf``, Go's exponents)."""


class Count:
    """One counter series."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.value += amount


class Histogram:
    """One histogram series: a count per bucket (not cumulated until exposed) and the sum."""

    __slots__ = ("bounds", "counts", "created", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, amount: float) -> None:
        # The first bucket whose upper bound holds the amount (prometheus-client's "<=").
        self.counts[bisect_left(self.bounds, amount)] += 1
        self.sum += amount


class _Family:
    def __init__(self, name: str, documentation: str, labelnames: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)


class CountFamily(_Family):
    """A labelled counter (``name`` without ``_total``, as prometheus-client's ``Counter``)."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str]) -> None:
        super().__init__(name.removesuffix("_total"), documentation, labelnames)
        self._series: dict[tuple[str, ...], Count] = {}

    def labels(self, *values: str) -> Count:
        found = self._series.get(values)
        if found is None:
            found = self._series[self._checked(values)] = Count()
        return found

    def _checked(self, values: tuple[str, ...]) -> tuple[str, ...]:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected {len(self.labelnames)} label values")
        return tuple(str(v) for v in values)

    def metric(self) -> Metric:
        metric = Metric(self.name, self.documentation, "counter")
        for values, series in list(self._series.items()):
            labels = dict(zip(self.labelnames, values, strict=True))
            metric.add_sample(self.name + "_total", labels, series.value)
            if _CREATED:
                metric.add_sample(self.name + "_created", labels, series.created)
        return metric


class HistogramFamily(_Family):
    """A labelled histogram (``unit`` appended to ``name``, as prometheus-client does)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        buckets: Sequence[float],
        unit: str = "",
    ) -> None:
        if unit and not name.endswith("_" + unit):
            name = f"{name}_{unit}"
        super().__init__(name, documentation, labelnames)
        self.unit = unit
        bounds = [float(b) for b in buckets]
        if bounds != sorted(bounds):
            raise ValueError("Buckets not in sorted order")
        if not bounds or bounds[-1] != math.inf:
            bounds.append(math.inf)
        self.bounds = tuple(bounds)
        self._le = tuple(_le_label(b) for b in self.bounds)
        self._series: dict[tuple[str, ...], Histogram] = {}

    def labels(self, *values: str) -> Histogram:
        found = self._series.get(values)
        if found is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: expected {len(self.labelnames)} label values")
            found = self._series[tuple(str(v) for v in values)] = Histogram(self.bounds)
        return found

    def metric(self) -> Metric:
        metric = Metric(self.name, self.documentation, "histogram", self.unit)
        for values, series in list(self._series.items()):
            labels = dict(zip(self.labelnames, values, strict=True))
            total = 0.0
            for le, count in zip(self._le, list(series.counts), strict=True):
                total += count
                metric.add_sample(self.name + "_bucket", {**labels, "le": le}, total)
            metric.add_sample(self.name + "_count", labels, total)
            if self.bounds[0] >= 0:
                metric.add_sample(self.name + "_sum", labels, series.sum)
            if _CREATED:
                metric.add_sample(self.name + "_created", labels, series.created)
        return metric


class Tallies(Collector):
    """The families made here, exposed by one collector registered in ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._families: list[CountFamily | HistogramFamily] = []
        self._registry = registry

    def counter(self, name: str, documentation: str, labelnames: Sequence[str]) -> CountFamily:
        family = CountFamily(name, documentation, labelnames)
        self._families.append(family)
        return family

    def histogram(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        *,
        buckets: Sequence[float],
        unit: str = "",
    ) -> HistogramFamily:
        family = HistogramFamily(name, documentation, labelnames, buckets=buckets, unit=unit)
        self._families.append(family)
        return family

    def register(self) -> None:
        """Expose the families made so far (once, after making them)."""
        self._registry.register(self)

    def collect(self) -> Iterator[Metric]:
        for family in self._families:
            yield family.metric()
