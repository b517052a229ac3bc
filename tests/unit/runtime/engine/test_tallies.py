"""The turn's tallies expose what prometheus-client's Counter and Histogram expose for the same
counts: the same families, series, samples and values (the ``_created`` times aside)."""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from ankka.runtime.engine.tallies import Tallies

BUCKETS = (0.01, 0.1, 1.0, 10.0)


def exposed(registry: CollectorRegistry) -> str:
    text = generate_latest(registry).decode()
    return re.sub(r"(_created\{[^}]*\}) \S+", r"\1 T", text)


def test_counts_and_histograms_expose_what_prometheus_client_does() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    counter = Counter("ankka_x", "Xs", ["agent", "kind"], registry=theirs)
    histogram = Histogram("ankka_y", "Ys", ["agent"], buckets=BUCKETS, registry=theirs)
    timed = Histogram("ankka_z", "Zs", ["m"], buckets=BUCKETS, unit="seconds", registry=theirs)
    tallies = Tallies(ours)
    count = tallies.counter("ankka_x", "Xs", ["agent", "kind"])
    buckets = tallies.histogram("ankka_y", "Ys", ["agent"], buckets=BUCKETS)
    seconds = tallies.histogram("ankka_z", "Zs", ["m"], buckets=BUCKETS, unit="seconds")
    tallies.register()
    for n, amount in enumerate([0.0, 0.01, 0.05, 0.1, 3.0, 10.0, 11.0, 1e9]):
        agent = f"a{n % 2}"
        for c in (counter.labels(agent, "k"), count.labels(agent, "k")):
            c.inc(n)
        for h in (histogram.labels(agent), buckets.labels(agent)):
            h.observe(amount)
        for t in (timed.labels("m"), seconds.labels("m")):
            t.observe(amount / 2)
    assert exposed(ours) == exposed(theirs)
    assert 'ankka_y_bucket{agent="a0",le="0.01"} 1.0' in exposed(ours)
    assert "ankka_z_seconds_sum" in exposed(ours)


def test_a_counter_refuses_a_negative_count_and_wrong_labels() -> None:
    tallies = Tallies(CollectorRegistry())
    count = tallies.counter("ankka_x", "Xs", ["agent"])
    with pytest.raises(ValueError, match="non-negative"):
        count.labels("a").inc(-1)
    with pytest.raises(ValueError, match="ankka_x: expected 1 label values"):
        count.labels("a", "b")
