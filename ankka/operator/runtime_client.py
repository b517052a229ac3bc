"""The HTTP clients the operator reaches runtimes with, and what a failure to reach one means.

An Agent's runtime is reached over mTLS (``https://``, its Service or ``spec.runtime.address``):
the operator presents ``ankka://platform/operator`` and accepts the runtime only when its
certificate is from the platform CA and names ``ankka://service/<ns>/<agent>``
(:mod:`ankka.operator.identity`). An ``http://`` address (a development runtime on loopback) is
reached in plain HTTP; that runtime then trusts its callers as ``local``.

One :class:`RuntimeClients` belongs to one Task daemon (or one cancellation): it owns its
clients and closes them, and builds the mTLS one again when the operator's certificate is
renewed. :func:`unreachable` turns a transport failure into a condition reason and a message
that says what to do.
"""

from __future__ import annotations

import ssl

import httpx2

from ankka.operator.agents import certificate_secret_name
from ankka.operator.identity import OperatorIdentity, WrongRuntimeIdentity

__all__ = ["RuntimeClients", "unreachable"]


class RuntimeClients:
    """``async with RuntimeClients(identity) as clients``: ``clients.get(address, uri)``."""

    def __init__(self, identity: OperatorIdentity, *, timeout: float) -> None:
        self._identity = identity
        self._timeout = timeout
        self._plain: httpx2.AsyncClient | None = None
        self._tls: httpx2.AsyncClient | None = None
        self._tls_for: tuple[str, int] | None = None

    async def get(self, address: str, expected_uri: str) -> httpx2.AsyncClient:
        """The client for ``address``: mTLS expecting ``expected_uri`` for ``https://``."""
        if not address.startswith("https://"):
            if self._plain is None:
                self._plain = httpx2.AsyncClient(timeout=self._timeout)
            return self._plain
        if (
            self._tls is None
            or self._identity.due()
            or self._tls_for
            != (
                expected_uri,
                self._identity.generation,
            )
        ):
            context = self._identity.context_for(expected_uri)
            if self._tls is not None:
                await self._tls.aclose()
            self._tls = httpx2.AsyncClient(timeout=self._timeout, verify=context)
            self._tls_for = (expected_uri, self._identity.generation)
        return self._tls

    async def __aenter__(self) -> RuntimeClients:
        return self

    async def __aexit__(self, *_: object) -> None:
        for client in (self._plain, self._tls):
            if client is not None:
                await client.aclose()
        self._plain = self._tls = None


def _cause(exc: BaseException) -> ssl.SSLError | None:
    seen: BaseException | None = exc
    for _ in range(8):  # the transport wraps the TLS error a few times
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def unreachable(
    exc: httpx2.HTTPError, *, address: str, namespace: str, agent: str
) -> tuple[str, str]:
    """(condition reason, message) for a runtime that could not be reached or was refused."""
    secret = f"{namespace}/{certificate_secret_name(agent)}"
    cause = _cause(exc)
    if isinstance(cause, WrongRuntimeIdentity):
        return (
            "WrongRuntimeIdentity",
            f"refused the runtime at {address}: {cause}. Point the Agent's "
            f"spec.runtime.address at {agent}'s own runtime, or serve that runtime with "
            f"{agent}'s certificate (--tls-dir holding the Secret {secret})",
        )
    if isinstance(cause, ssl.SSLCertVerificationError):
        return (
            "UnknownRuntimeCA",
            f"refused the runtime at {address}: its certificate is not one the platform CA "
            f"issued ({cause.verify_message or cause}). Serve it with --tls-dir holding the "
            f"Secret {secret} (tls.crt, tls.key, ca.crt)",
        )
    if cause is not None:
        return (
            "TLSRefused",
            f"TLS with the runtime at {address} failed ({getattr(cause, 'reason', None) or cause})"
            f". A runtime at an https:// address must serve --tls-dir with the Secret {secret}, "
            "whose ca.crt is the platform CA (it checks the operator's certificate against it); "
            "a plain-HTTP runtime on loopback is written http://",
        )
    return (
        "RuntimeUnreachable",
        f"cannot reach the runtime at {address}: {type(exc).__name__}: {exc}",
    )
