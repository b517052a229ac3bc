"""A caller's fair share of a listener's request slots (issue 31, item 7).

A listener holds at most ``max_connections`` connections, and a connection working on a
request cannot be closed to make room: one caller holding long-lived streams on every one of
them left every other caller, and the probes, with 503. :class:`CallerShares` counts the
requests each caller has in flight and refuses one past its share, so the slots it may not
take stay free for everyone else. The servers decide who a caller is (the runtime after it
identified the request, the gateway by the client certificate) and never count health paths.
Pure bookkeeping.
"""

from __future__ import annotations

__all__ = ["CallerShares"]


class CallerShares:
    """At most ``share`` requests in flight per caller."""

    def __init__(self, share: int) -> None:
        if share < 1:
            raise ValueError("a caller's share must be at least 1")
        self.share = share
        self.held: dict[str, int] = {}
        self.refused = 0

    def take(self, caller: str) -> bool:
        """Count one more request of ``caller``'s; False (nothing counted) past its share."""
        held = self.held.get(caller, 0)
        if held >= self.share:
            self.refused += 1
            return False
        self.held[caller] = held + 1
        return True

    def give_back(self, caller: str) -> None:
        left = self.held.get(caller, 0) - 1
        if left > 0:
            self.held[caller] = left
        else:
            self.held.pop(caller, None)
