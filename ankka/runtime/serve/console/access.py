"""Who is using the console: the caller the runtime identified, as for the API.

The console shows a caller what the session policy lets it read
(:mod:`ankka.runtime.declare.policy`)
and lets it decide what the policy lets it decide. On loopback that is the caller the
runtime's identification named (``local`` without one); off loopback only a caller the runtime
identified (a client certificate with ``--tls-dir`` or a token with ``--token-file``): a
runtime run with ``--trust-network`` identifies nobody, so its console answers loopback
callers only.
"""

from __future__ import annotations

import ipaddress

from starlette.requests import Request

from ankka.runtime.declare.policy import LOCAL
from ankka.runtime.serve.identity import caller_of

__all__ = ["console_caller", "is_loopback"]


def is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def console_caller(request: Request) -> str | None:
    """Who uses the console for this request, or None (refused): on loopback the caller the
    runtime named (``local`` when it identifies nobody), elsewhere an identified caller."""
    caller = caller_of(request.scope)
    host = request.client.host if request.client else None
    if is_loopback(host):
        return caller
    return caller if caller != LOCAL else None
