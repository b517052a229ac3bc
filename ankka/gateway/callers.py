"""Who may use a model, and how much of it: the gateway's authorisation.

Authentication is the TLS layer's (a client certificate from the platform CA); this module
decides what an authenticated caller may do. A caller is named by its certificate's URI SAN:
``ankka://service/<namespace>/<agent>`` is ``<namespace>/<agent>`` (the form metrics show),
another ``ankka://`` URI is itself, and a certificate with no ``ankka://`` URI SAN is
:data:`UNIDENTIFIED` and refused (with ``--insecure`` every caller is ``anonymous``).

A model whose entry in the models file lists ``callers`` serves only those (the operator renders
each Agent's service identity under the models its ``spec.models`` names); a model without
``callers`` serves every authenticated caller. ``max_in_flight_per_caller`` bounds one caller's
requests in flight on one model, so one busy agent cannot take every slot of a shared model,
and ``tokens_per_minute_per_caller`` bounds what it spends there (:class:`TokenBudget`).
Pure decisions plus one counter; called by :mod:`ankka.gateway.app` once per request.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ankka._kernel.identity import SERVICE_PREFIX, UNIDENTIFIED, caller_name

__all__ = [
    "ANONYMOUS",
    "SERVICE_PREFIX",
    "UNIDENTIFIED",
    "CallersInFlight",
    "Reservation",
    "TokenBudget",
    "allowed",
    "caller_name",
    "caller_names",
]

ANONYMOUS = "anonymous"
_PLATFORM_SCHEME = "ankka://"


def caller_names(entries: Iterable[str]) -> frozenset[str]:
    """A models file's ``callers`` in the form :func:`caller_name` gives (URIs or short)."""
    return frozenset(caller_name([e]) if e.startswith(_PLATFORM_SCHEME) else e for e in entries)


def allowed(callers: frozenset[str] | None, caller: str) -> bool:
    """Whether ``caller`` may use a model that lists ``callers`` (None: every caller)."""
    return callers is None or caller in callers


@dataclass(frozen=True, slots=True)
class Reservation:
    """Tokens held for one request until it is answered (:meth:`TokenBudget.settle`)."""

    caller: str
    tokens: int


_NOTHING_HELD = Reservation("", 0)


class TokenBudget:
    """Tokens one caller may spend on one model per minute (a sliding 60-second window).

    A request reserves its bound before it is sent (:meth:`reserve`: the body's length, which
    no prompt's tokens exceed, plus its ``max_tokens``) and settles what its answer spent
    after (:meth:`settle`), so requests in flight at once count against the budget before
    anyone knows their usage. A request is refused while the caller's spend in the window plus
    what its requests in flight hold reaches ``limit``: so at most ``limit`` plus one request's
    bound is ever spent in a minute, however many are sent at once (issue 31, item 8).
    """

    WINDOW_S = 60.0

    def __init__(self, limit: int | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self._clock = clock
        self._spent: dict[str, deque[tuple[float, int]]] = {}
        self._totals: dict[str, int] = {}
        self._held: dict[str, int] = {}

    def _expire(self, caller: str, now: float) -> None:
        spends = self._spent.get(caller)
        while spends and spends[0][0] <= now - self.WINDOW_S:
            _, tokens = spends.popleft()
            self._totals[caller] -= tokens
        if spends is not None and not spends:
            del self._spent[caller]
            del self._totals[caller]

    def reserve(self, caller: str, bound: int) -> Reservation | float:
        """Hold ``bound`` tokens for a request of ``caller``; or, refused, the seconds until
        it may send again."""
        if self.limit is None:
            return _NOTHING_HELD
        now = self._clock()
        self._expire(caller, now)
        spent = self._totals.get(caller, 0)
        held = self._held.get(caller, 0)
        if spent + held < self.limit:
            self._held[caller] = held + bound
            return Reservation(caller, bound)
        if spent < self.limit:
            return 1.0  # held by requests in flight, which settle when answered
        oldest = self._spent[caller][0][0]
        return max(oldest + self.WINDOW_S - now, 0.0)

    def settle(self, held: Reservation, spent: int) -> None:
        """The request ``held`` was for is over and spent ``spent`` tokens."""
        if self.limit is None:
            return
        left = self._held.get(held.caller, 0) - held.tokens
        if left > 0:
            self._held[held.caller] = left
        else:
            self._held.pop(held.caller, None)
        self.spend(held.caller, spent)

    def spend(self, caller: str, tokens: int) -> None:
        if self.limit is None or tokens <= 0:
            return
        self._spent.setdefault(caller, deque()).append((self._clock(), tokens))
        self._totals[caller] = self._totals.get(caller, 0) + tokens


class CallersInFlight:
    """Requests in flight on one model, per caller; :meth:`enter` refuses past ``limit``."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._counts: dict[str, int] = {}

    def enter(self, caller: str) -> bool:
        if self.limit is None:
            return True
        count = self._counts.get(caller, 0)
        if count >= self.limit:
            return False
        self._counts[caller] = count + 1
        return True

    def leave(self, caller: str) -> None:
        if self.limit is None:
            return
        count = self._counts.get(caller, 0) - 1
        if count > 0:
            self._counts[caller] = count
        else:
            self._counts.pop(caller, None)
