"""Who is calling the runtime, and whether they may touch a session.

The ways to know a caller, chosen by how ``ankka serve`` is started:

- **client certificates** (``--tls-dir DIR``): mTLS with the platform's CA; the caller is the
  certificate's ``ankka://`` URI SAN (:func:`ankka._kernel.identity.caller_name`), and a
  certificate without one is refused (403);
- **static tokens** (``--token-file FILE``): each line ``CALLER TOKEN``; a request sends
  ``Authorization: Bearer TOKEN`` and is that caller, or is refused (401);
- **service-account tokens** (``--token-review-url URL``): a bearer token that is not a static
  one is checked with Kubernetes' TokenReview (:mod:`ankka.runtime.serve.tokenreview`); the caller
  is ``system:serviceaccount:<ns>:<name>``, a refused token 401, an outage 503;
- **both**: with ``--tls-dir`` and tokens (a token file, or TokenReview) the TLS layer asks for
  a client certificate but does not require one; a certificate that is sent names the caller
  (403 without an ``ankka://`` URI SAN), and a caller without one must send a token (401);
- **loopback**: a server bound to a loopback address with neither trusts its callers as
  :data:`LOCAL` (the laptop default, so the README's curl commands work). Bound to any other
  address it refuses to start without one of the two (``--trust-network`` overrides that,
  loudly, for a network that is itself the boundary).

Sessions record the caller that created them and their agent (a ``session_opened`` journal
record, :mod:`ankka.runtime.records.session`); :mod:`ankka.runtime.declare.policy` says who
else may act on one. Pure, except
:func:`load_tokens` reading its file.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ankka._kernel.errors import ConfigurationError, RequestError
from ankka._kernel.identity import UNIDENTIFIED, caller_name
from ankka.runtime.declare.policy import LOCAL, NotPermitted

if TYPE_CHECKING:
    from ankka.runtime.serve.tokenreview import TokenReviewer

__all__ = ["Identify", "Unauthenticated", "caller_of", "is_loopback", "load_tokens"]

MIN_TOKEN = 16


class Unauthenticated(RequestError):
    kind = "unauthenticated"
    status = 401


def caller_of(scope: Mapping[str, Any]) -> str:
    """Who is calling, as :class:`Identify` named them in front of the routes."""
    return str(scope.get("ankka.caller", LOCAL))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_tokens(path: str | Path) -> dict[str, str]:
    """token → caller, from lines ``CALLER TOKEN`` (``#`` starts a comment)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise ConfigurationError(f"cannot read the token file {path}: {exc.strerror}") from exc
    tokens: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or len(parts[1]) < MIN_TOKEN:
            raise ConfigurationError(
                f"{path}, line {number}: write CALLER TOKEN, with a token of at least "
                f"{MIN_TOKEN} characters"
            )
        tokens[parts[1]] = parts[0]
    if not tokens:
        raise ConfigurationError(f"the token file {path} names no caller")
    return tokens


Scope = MutableMapping[str, Any]


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


def _sent_certificate(scope: Scope) -> bool:
    tls = (scope.get("extensions") or {}).get("tls") or {}
    return bool(tls.get("peer_certificate") or tls.get("peer_uri_sans"))


class Identify:
    """Names the caller of each request (``scope["ankka.caller"]``), or refuses it."""

    def __init__(
        self,
        *,
        tls: bool,
        tokens: Mapping[str, str] | None,
        trust: bool,
        reviewer: TokenReviewer | None = None,
    ) -> None:
        self._tls = tls
        self._tokens = dict(tokens or {})
        self._trust = trust
        self._reviewer = reviewer

    async def resolve(self, scope: Scope) -> str:
        """:meth:`caller`, and before it a bearer token that is no static one, reviewed by
        TokenReview when configured (a certificate naming a URI still wins)."""
        if self._reviewer is not None and not _sent_certificate(scope):
            sent = _bearer(scope)
            if sent is not None and self._static(sent) is None:
                client = scope.get("client")
                source = str(client[0]) if client else ""
                return await self._reviewer.review(sent, source=source)
        return self.caller(scope)

    def _static(self, sent: str) -> str | None:
        for token, caller in self._tokens.items():
            if hmac.compare_digest(sent.encode(), token.encode()):
                return caller
        return None

    def caller(self, scope: Scope) -> str:
        # A client certificate names the caller; without one (a server that only asks for
        # it, because tokens are accepted too) the caller must send a token.
        if self._tls and (_sent_certificate(scope) or not (self._tokens or self._reviewer)):
            extensions = scope.get("extensions") or {}
            uris = (extensions.get("tls") or {}).get("peer_uri_sans", ())
            name = caller_name(uris)
            if name == UNIDENTIFIED:
                raise NotPermitted(
                    "the client certificate names no ankka:// identity (a URI SAN such as "
                    "ankka://service/<namespace>/<agent>)"
                )
            return name
        if self._tokens:
            sent = _bearer(scope)
            known = None if sent is None else self._static(sent)
            if known is not None:
                return known
            raise Unauthenticated(
                "send Authorization: Bearer <token> with a token this runtime was given"
                + (" or a Kubernetes service-account token" if self._reviewer else "")
            )
        if self._trust:
            return LOCAL
        if self._reviewer is not None:
            raise Unauthenticated("send Authorization: Bearer <a Kubernetes service-account token>")
        raise Unauthenticated("this runtime knows no way to identify callers")
