"""Who may use a model, and how much of it: the gateway's authorisation.

Authentication is the TLS layer's (a client certificate from the platform CA); this module
decides what an authenticated caller may do. A caller is named by its certificate's URI SAN:
``ankka://service/<namespace>/<agent>`` is ``<namespace>/<agent>`` (the form metrics show),
another ``ankka://`` URI is itself, and a certificate with no ``ankka://`` URI SAN is
:data:`UNIDENTIFIED` and refused (with ``--insecure`` every caller is ``anonymous``).

A model whose entry in the models file lists ``callers`` serves only those (the operator renders
each Agent's service identity under the models its ``spec.models`` names); a model without
``callers`` serves every authenticated caller. ``max_in_flight_per_caller`` bounds one caller's
requests in flight on one model, so one busy agent cannot take every slot of a shared model.
Pure decisions plus one counter; called by :mod:`ankka.gateway.app` once per request.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "ANONYMOUS",
    "SERVICE_PREFIX",
    "UNIDENTIFIED",
    "CallersInFlight",
    "allowed",
    "caller_name",
    "caller_names",
]

ANONYMOUS = "anonymous"
UNIDENTIFIED = "unidentified"
SERVICE_PREFIX = "ankka://service/"
_PLATFORM_SCHEME = "ankka://"


def caller_name(uris: Iterable[str]) -> str:
    """The caller a certificate's URI SANs name, or :data:`UNIDENTIFIED`."""
    others = []
    for uri in uris:
        if uri.startswith(SERVICE_PREFIX):
            return uri[len(SERVICE_PREFIX) :]
        if uri.startswith(_PLATFORM_SCHEME):
            others.append(uri)
    return others[0] if others else UNIDENTIFIED


def caller_names(entries: Iterable[str]) -> frozenset[str]:
    """A models file's ``callers`` in the form :func:`caller_name` gives (URIs or short)."""
    return frozenset(caller_name([e]) if e.startswith(_PLATFORM_SCHEME) else e for e in entries)


def allowed(callers: frozenset[str] | None, caller: str) -> bool:
    """Whether ``caller`` may use a model that lists ``callers`` (None: every caller)."""
    return callers is None or caller in callers


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
