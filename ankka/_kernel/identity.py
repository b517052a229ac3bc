"""How a caller is named from its client certificate, for every server that checks one.

The platform's certificates carry URI SANs: ``ankka://service/<namespace>/<agent>`` for an
agent's runtime, ``ankka://platform/<part>`` for the platform's own parts. A caller is named
``<namespace>/<agent>`` for a service (the form metrics and policies use), by its whole URI for
another ``ankka://`` identity, and :data:`UNIDENTIFIED` when its certificate has no ``ankka://``
URI SAN (the gateway and the runtime refuse such a caller). Pure; no heavy imports.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["PLATFORM_PREFIX", "SERVICE_PREFIX", "UNIDENTIFIED", "caller_name", "is_platform"]

UNIDENTIFIED = "unidentified"
SERVICE_PREFIX = "ankka://service/"
PLATFORM_PREFIX = "ankka://platform/"
_SCHEME = "ankka://"


def caller_name(uris: Iterable[str]) -> str:
    """The caller a certificate's URI SANs name, or :data:`UNIDENTIFIED`."""
    others = []
    for uri in uris:
        if uri.startswith(SERVICE_PREFIX):
            return uri[len(SERVICE_PREFIX) :]
        if uri.startswith(_SCHEME):
            others.append(uri)
    return others[0] if others else UNIDENTIFIED


def is_platform(caller: str) -> bool:
    """Whether ``caller`` is one of the platform's own parts (``ankka://platform/...``)."""
    return caller.startswith(PLATFORM_PREFIX)
