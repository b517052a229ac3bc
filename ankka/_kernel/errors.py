"""The one error tree of ankka, split by who must act: five public families under the root.

- :class:`ConfigurationError`: whoever deploys the service must fix a setting, a declaration
  or a file.
- :class:`RequestError`: the caller must change the request: it cannot be served as sent (a
  bad body, an unknown agent, a conflict), or the caller may not make it (unidentified 401,
  not permitted 403).
- :class:`Refused`: refused on purpose (a guardrail, a capability check, a full queue).
- :class:`DependencyFailed`: something ankka depends on failed; whoever runs it must act, or
  wait: a model's provider (:class:`ModelError`, which always names the provider the service
  configured, never the SDK's vendor, its detail redacted by :mod:`ankka._kernel.redact` so an
  upstream that echoes a key cannot leak it), an upstream server, the store, the Kubernetes
  API, an MCP server, a judge.
- :class:`TurnFailed`: the turn ran but could not finish (tool rounds exhausted, a typed answer
  that did not decode, a suspended turn whose agent is gone).

What only steers control flow inside one module is a private exception outside the tree
(``_End``, ``_Wait``): nobody outside catches it. ``tests/unit/test_error_tree.py`` holds
every public class to one of the five families.

Each class carries ``kind`` (a stable machine-readable word, shown as ``error.type`` on the
HTTP API) and ``status`` (the HTTP status the runtime answers with).
"""

from __future__ import annotations

from ankka._kernel.redact import redact

__all__ = [
    "FAMILIES",
    "AnkkaError",
    "ConfigurationError",
    "DependencyFailed",
    "InvalidJSON",
    "ModelAuthenticationError",
    "ModelError",
    "ModelTimeout",
    "ModelUnavailable",
    "NotFound",
    "Refused",
    "RequestError",
    "StoreError",
    "StoreOutcomeUnknown",
    "StoreUnavailable",
    "TurnFailed",
]


class AnkkaError(Exception):
    """Root of every error ankka raises on purpose."""

    kind: str = "internal_error"
    status: int = 500
    # Seconds after which the same request may succeed (sent as ``Retry-After``), when the
    # failure is one that passes by itself; None when sending it again would not help.
    retry_after: float | None = None

    @property
    def message(self) -> str:
        return str(self)


class ConfigurationError(AnkkaError):
    """A setting or declaration is wrong; the service's owner must fix it."""

    kind = "configuration_error"
    status = 500


class RequestError(AnkkaError):
    """The request cannot be served as sent; the caller must change it."""

    kind = "invalid_request"
    status = 422


class InvalidJSON(RequestError):
    kind = "invalid_json"
    status = 400


class NotFound(RequestError):
    kind = "not_found"
    status = 404


class Refused(AnkkaError):
    """Refused on purpose (a guardrail, a capability check). ``by`` names who refused."""

    kind = "refused"
    status = 403

    def __init__(self, reason: str, *, by: str) -> None:
        super().__init__(f"refused by {by}: {reason}")
        self.reason = reason
        self.by = by


class DependencyFailed(AnkkaError):
    """Something ankka depends on failed (a model, an upstream, the store, Kubernetes, an MCP
    server, a judge); whoever runs it must act, or the caller may try again later."""

    kind = "dependency_failed"
    status = 502


class ModelError(DependencyFailed):
    """The model provider failed. ``provider`` is the name the service configured."""

    kind = "model_error"
    status = 502

    def __init__(self, provider: str, detail: str, *, http_status: int | None = None) -> None:
        # The detail often quotes the server, which may echo the key it was sent.
        detail = redact(detail)
        where = f"model provider {provider!r}"
        status_part = f" (HTTP {http_status})" if http_status is not None else ""
        super().__init__(f"{where} failed{status_part}: {detail}")
        self.provider = provider
        self.detail = detail
        self.http_status = http_status

    @property
    def retryable(self) -> bool:
        """Whether the same call, made again after a pause, may succeed: the provider was
        down, timed out, answered 5xx, 408 or 429. A refused key or request is not, nor is a
        scripted model out of script (each such class says so itself)."""
        status = self.http_status
        return status is None or status >= 500 or status in (408, 429)


class ModelUnavailable(ModelError):
    kind = "model_unavailable"
    status = 502


class ModelTimeout(ModelError):
    kind = "model_timeout"
    status = 504


class ModelAuthenticationError(ModelError):
    kind = "model_authentication_failed"
    status = 502

    @property
    def retryable(self) -> bool:
        return False  # the key is refused: the deployer must act


class TurnFailed(AnkkaError):
    """The turn could not finish (round limit, an answer that does not decode)."""

    kind = "turn_failed"
    status = 502


class StoreError(DependencyFailed):
    """The session store cannot be opened or written."""

    kind = "store_error"
    status = 500


class StoreUnavailable(StoreError):
    """The store cannot be reached now (its server is down or restarting, its file busy):
    nothing was written, and the same request may succeed later. Answered 503 with
    ``Retry-After`` (``retry_after`` seconds)."""

    kind = "store_unavailable"
    status = 503
    retry_after = 1


class StoreOutcomeUnknown(StoreError):
    """The store's connection broke while a commit was being made: it may or may not have
    been written. Not safe to send again as is: read what it would have written first."""

    kind = "store_outcome_unknown"
    status = 500


FAMILIES: tuple[type[AnkkaError], ...] = (
    ConfigurationError,
    RequestError,
    Refused,
    DependencyFailed,
    TurnFailed,
)
"""The public families, each a direct child of :class:`AnkkaError`; every public error class
derives from exactly one of them."""
