"""A least-recently-used map bounded by entries and by bytes: the folds the engine keeps.

A session's fold grows with the session, so a cache bounded by how many sessions it holds is
bounded by nothing: a few long sessions fill memory as surely as many short ones. Each value
is weighed when it is put (a cheap estimate of the bytes it holds, see
:func:`~ankka.runtime.engine.view.weight`), and the oldest values go until both bounds hold.
A value heavier than the whole byte budget is not kept at all (its next use reads the journal
again). Pure; not thread-safe (the event loop's).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["DEFAULT_CACHE_BYTES", "WeighedLRU"]

DEFAULT_CACHE_BYTES = 256 * 1024 * 1024

K = TypeVar("K")
V = TypeVar("V")


class WeighedLRU(Generic[K, V]):
    def __init__(self, weigh: Callable[[V], int], *, entries: int, max_bytes: int) -> None:
        self._weigh = weigh
        self._entries = entries
        self._max_bytes = max_bytes
        self._values: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.bytes = 0
        """The weight of what is held now."""

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def pop(self, key: K) -> V | None:
        found = self._values.pop(key, None)
        if found is None:
            return None
        self.bytes -= found[1]
        return found[0]

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` as the newest (weighed now), evicting the oldest past either bound."""
        self.pop(key)
        weight = self._weigh(value)
        if weight > self._max_bytes:
            return
        self._values[key] = (value, weight)
        self.bytes += weight
        while len(self._values) > self._entries or self.bytes > self._max_bytes:
            _, (_, dropped) = self._values.popitem(last=False)
            self.bytes -= dropped
