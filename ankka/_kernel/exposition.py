"""What the runtime's and the gateway's Prometheus metrics share: the text format's content type
and the latency bucket ladder (1 ms to 2 min) of every histogram of a call's seconds, so the
same question ("how many calls took over 250 ms?") has the same answer on both.

Plain values: no prometheus-client here (``_kernel`` imports nothing heavy); each deployable
declares its own metrics with them."""

from __future__ import annotations

__all__ = ["CONTENT_TYPE", "LATENCY_BUCKETS"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
)
