"""A labelled Prometheus metric whose children are found once per label values.

prometheus-client's ``labels()`` checks its arguments, converts each value with ``str``, takes
the metric's lock and looks the child up on every call; a turn counts a dozen series, so that
was a tenth of a turn's own work. :class:`Labelled` keeps each child it was given by its label
values (the same objects prometheus-client holds: what is counted and exposed does not change).
The label sets are the metric's own (bounded where the metric is declared), so this map is
bounded by the same. Nothing here removes a child (``remove``/``clear``): a metric wrapped
here must never be cleared behind its back.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from prometheus_client.metrics import MetricWrapperBase

__all__ = ["Labelled"]

M = TypeVar("M", bound=MetricWrapperBase)


class Labelled(Generic[M]):
    __slots__ = ("_children", "metric")

    def __init__(self, metric: M) -> None:
        self.metric = metric
        self._children: dict[tuple[str, ...], M] = {}

    def labels(self, *values: str) -> M:
        """The child of these label values (made by prometheus-client the first time)."""
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self.metric.labels(*values)
        return child
