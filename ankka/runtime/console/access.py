"""Who may use the console: loopback callers, and elsewhere a platform identity.

Off loopback the runtime's own identification (a client certificate with ``--tls-dir`` or a
token with ``--token-file``) names the caller; the console shows every session, which the
session policy allows only the platform's identities (``ankka://platform/...``), so those are
the ones it answers. A runtime run with ``--trust-network`` identifies nobody: its console
answers loopback callers only.
"""

from __future__ import annotations

import ipaddress

from starlette.requests import Request

from ankka._kernel.identity import is_platform
from ankka.runtime.identity import caller_of

__all__ = ["console_caller", "is_loopback"]


def is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def console_caller(request: Request) -> str | None:
    """Who may use the console for this request, or None: loopback callers (as ``local``)
    and, elsewhere, a platform identity the runtime's identification established."""
    host = request.client.host if request.client else None
    if is_loopback(host):
        return "local"
    caller = caller_of(request.scope)
    return caller if is_platform(caller) else None
