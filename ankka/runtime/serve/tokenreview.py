"""Kubernetes service-account tokens as callers, checked with the TokenReview API.

Who calls this: :class:`ankka.runtime.serve.identity.Identify`, for a request whose bearer token is
not one of the runtime's static tokens, when ``ankka serve`` is given ``--token-review-url``
(the operator renders ``ANKKA_TOKEN_REVIEW_URL`` and ``ANKKA_TOKEN_REVIEW_AUDIENCE``). The
caller is Kubernetes' own name for the account, ``system:serviceaccount:<ns>:<name>``; any
other kind of user the API server knows is refused, so no token can claim a platform name.

The runtime authenticates to the API server with its own service-account token (re-read on
every review, since projected tokens rotate) and trusts the CA beside it; both default to the
standard mount paths. It never imports a Kubernetes client (one POST over httpx2).

Answers are cached by the token's SHA-256 (the token itself is never kept, logged or quoted):
an accepted token for ``ttl`` seconds, never past the ``exp`` its JWT claims; a refused one for
``refused_ttl`` seconds, so a flood of one bad token costs one review a minute; an outage not
at all. Accepted and refused verdicts are kept apart, each at most ``max_entries`` (least
recently used goes first), so refused tokens, however many, never push out an accepted one.
Every review can be made to cost the API server (issue 31, item 9: 3,000 random bearer tokens
cost 3,001 reviews and evicted the good verdicts), so before asking: a token that is not a
JWT (every service-account token is one) is refused without asking, and one source address
may have at most ``review_burst`` reviews asked at once and ``reviews_per_second`` after
(429 ``too_many_token_reviews`` with ``Retry-After`` past it; answers from the cache are not
counted); at most ``max_in_flight`` reviews run at once. What happens to each token is counted
in ``ankka_token_reviews_total{outcome}``. An unreachable or refusing API server is 503
naming TokenReview, never 401: the caller's token may be good.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import ssl
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx2
from prometheus_client import CollectorRegistry, Counter

from ankka._kernel.clock import Clock, SystemClock
from ankka._kernel.errors import DependencyFailed, Refused
from ankka.runtime.serve.identity import Unauthenticated

__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "ReviewCache",
    "ReviewSettings",
    "SourceRate",
    "TokenRefused",
    "TooManyReviews",
    "TokenReviewUnavailable",
    "TokenReviewer",
    "cache_seconds",
    "jwt_shaped",
    "service_account_caller",
]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
MAX_TOKEN = 16 * 1024  # bound SA tokens are ~1 KiB; anything far longer is not one
_PREFIX = "system:serviceaccount:"


class TokenRefused(Unauthenticated):
    """The API server does not vouch for the token: the caller must send another."""

    kind = "unauthenticated"
    status = 401


class TooManyReviews(Refused):
    """This address asked for more reviews than it may: it retries after ``retry_after`` s."""

    kind = "too_many_token_reviews"
    status = 429
    retry_after: float  # set by every raise (Retry-After, in whole seconds, on the answer)

    def __init__(self, retry_after: float) -> None:
        super().__init__(
            "this address sent more new bearer tokens than the runtime reviews for it; "
            f"retry in {max(1, round(retry_after))} s",
            by="the TokenReview rate per address",
        )
        self.retry_after = retry_after


class TokenReviewUnavailable(DependencyFailed):
    """The API server could not be asked: whoever runs the cluster must act (or retry)."""

    kind = "token_review_unavailable"
    status = 503


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewSettings:
    """Where and how to review tokens."""

    url: str  # the API server's base URL, e.g. https://kubernetes.default.svc
    audience: str | None = None  # a token must be for this audience (none: the server's own)
    credential_file: Path = SERVICE_ACCOUNT_DIR / "token"  # this runtime's own token
    ca_file: Path | None = SERVICE_ACCOUNT_DIR / "ca.crt"  # None: the system's trust store
    ttl: float = 60.0
    refused_ttl: float = 60.0
    max_entries: int = 4096  # of each kind of verdict: accepted, refused
    max_in_flight: int = 16
    timeout: float = 5.0
    reviews_per_second: float = 5.0  # per source address, past its burst
    review_burst: int = 20


def service_account_caller(username: str) -> str | None:
    """``username`` when it is a service account's (``system:serviceaccount:<ns>:<name>``)."""
    rest = username.removeprefix(_PREFIX)
    if rest == username:
        return None
    namespace, sep, name = rest.partition(":")
    if not sep or not namespace or not name or ":" in name:
        return None
    return username


def jwt_shaped(token: str) -> bool:
    """Whether ``token`` looks like a JWT (three base64url parts, a JSON header naming its
    ``alg``), as every Kubernetes service-account token does; pure, nothing is verified."""
    parts = token.split(".")
    if len(parts) != 3 or not all(parts):
        return False
    try:
        header = json.loads(base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4)))
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(header, dict) and isinstance(header.get("alg"), str)


class SourceRate:
    """Reviews one source address may have asked: a bucket of ``burst`` refilled at
    ``per_second``, for at most ``max_sources`` addresses (least recently seen go first)."""

    def __init__(
        self, *, per_second: float, burst: int, clock: Clock, max_sources: int = 4096
    ) -> None:
        self._rate = per_second
        self._burst = float(burst)
        self._clock = clock
        self._max = max_sources
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, source: str) -> float | None:
        """Take one review for ``source``: None when it may, else the seconds until it may."""
        now = self._clock.monotonic()
        level, since = self._buckets.get(source, (self._burst, now))
        level = min(self._burst, level + (now - since) * self._rate)
        taken = level >= 1.0
        self._buckets[source] = (level - 1.0 if taken else level, now)
        self._buckets.move_to_end(source)
        while len(self._buckets) > self._max:
            self._buckets.popitem(last=False)
        return None if taken else (1.0 - level) / self._rate


def _claimed_expiry(token: str) -> float | None:
    """The ``exp`` a JWT claims (unverified: the API server verified it), or None."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        exp = json.loads(payload).get("exp")
    except (ValueError, AttributeError):
        return None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


def cache_seconds(token: str, *, ttl: float, now: float) -> float:
    """How long an accepted token's verdict is kept: ``ttl``, never past its claimed ``exp``."""
    exp = _claimed_expiry(token)
    return ttl if exp is None else min(ttl, exp - now)


class ReviewCache:
    """Verdicts by token digest, each until its own deadline, at most ``max_entries``.

    A verdict is the caller's name, or None for a refused token."""

    def __init__(self, *, max_entries: int, clock: Clock) -> None:
        if max_entries < 1:
            raise ValueError("a review cache holds at least one entry")
        self._max = max_entries
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[str | None, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> tuple[str | None] | None:
        """``(verdict,)`` while it is fresh, else None (and the stale entry is dropped)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[1] <= self._clock.monotonic():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return (entry[0],)

    def put(self, key: bytes, verdict: str | None, seconds: float) -> None:
        if seconds <= 0:
            self._entries.pop(key, None)
            return
        self._entries[key] = (verdict, self._clock.monotonic() + seconds)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)


class TokenReviewer:
    """Reviews bearer tokens at the API server; an async context manager owning its client."""

    def __init__(
        self,
        settings: ReviewSettings,
        *,
        clock: Clock | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self._clock: Clock = clock or SystemClock()
        # Apart, so refused tokens (anyone can make up more) never push out accepted ones.
        self.cache = ReviewCache(max_entries=settings.max_entries, clock=self._clock)
        self.refused = ReviewCache(max_entries=settings.max_entries, clock=self._clock)
        self.rate = SourceRate(
            per_second=settings.reviews_per_second,
            burst=settings.review_burst,
            clock=self._clock,
        )
        self._gate = asyncio.Semaphore(settings.max_in_flight)
        self._transport = transport
        self._client: httpx2.AsyncClient | None = None
        self.reviews = 0  # requests sent to the API server (for tests and metrics)
        self._outcomes = Counter(
            "ankka_token_reviews",
            "Bearer tokens checked with TokenReview, by outcome: accepted, refused, "
            "unavailable (the API server was asked), cached, malformed (not a JWT: not asked), "
            "limited (too many from the address: not asked)",
            ["outcome"],
            registry=registry if registry is not None else CollectorRegistry(),
        )

    async def __aenter__(self) -> TokenReviewer:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _unavailable(self, why: str) -> TokenReviewUnavailable:
        return TokenReviewUnavailable(
            f"cannot check the service-account token: TokenReview at {self.settings.url} "
            f"{why}; try again later"
        )

    def _http(self) -> httpx2.AsyncClient:
        if self._client is None:
            # Built on first use, so a runtime whose callers never send tokens starts (and
            # answers /readyz) even where the service-account files are missing.
            verify: ssl.SSLContext | bool = True
            ca = self.settings.ca_file
            if ca is not None:
                try:
                    verify = ssl.create_default_context(cafile=str(ca))
                except (OSError, ssl.SSLError) as exc:
                    raise self._unavailable(f"cannot be trusted: CA file {ca}: {exc}") from None
            self._client = httpx2.AsyncClient(
                verify=verify,
                timeout=httpx2.Timeout(self.settings.timeout),
                transport=self._transport,
            )
        return self._client

    def _credential(self) -> str:
        path = self.settings.credential_file
        try:
            own = path.read_text().strip()
        except OSError as exc:
            raise self._unavailable(
                f"cannot be asked: this runtime's own token {path}: {exc.strerror}"
            ) from None
        if not own:
            raise self._unavailable(f"cannot be asked: this runtime's own token {path} is empty")
        return own

    async def review(self, token: str, *, source: str = "") -> str:
        """The caller ``token`` (sent from address ``source``) names,
        ``system:serviceaccount:<ns>:<name>``.

        Raises :class:`TokenRefused` (401), :class:`TooManyReviews` (429) or
        :class:`TokenReviewUnavailable` (503)."""
        if not token or len(token) > MAX_TOKEN:
            raise TokenRefused(f"the bearer token is empty or longer than {MAX_TOKEN} characters")
        if not jwt_shaped(token):
            self._outcomes.labels("malformed").inc()
            raise self._refusal()
        key = hashlib.sha256(token.encode()).digest()
        known = self.cache.get(key) or self.refused.get(key)
        if known is not None:
            self._outcomes.labels("cached").inc()
        else:
            wait = self.rate.take(source)
            if wait is not None:
                self._outcomes.labels("limited").inc()
                raise TooManyReviews(wait)
            async with self._gate:
                # Another request may have asked meanwhile.
                known = self.cache.get(key) or self.refused.get(key)
                if known is None:
                    known = (await self._counted_ask(key, token),)
        if known[0] is None:
            raise self._refusal()
        return known[0]

    async def _counted_ask(self, key: bytes, token: str) -> str | None:
        try:
            verdict = await self._ask(key, token)
        except TokenReviewUnavailable:
            self._outcomes.labels("unavailable").inc()
            raise
        self._outcomes.labels("refused" if verdict is None else "accepted").inc()
        return verdict

    def _refusal(self) -> TokenRefused:
        return TokenRefused(
            "the Kubernetes API server does not accept this service-account token "
            "(TokenReview): it is expired, revoked, for another audience or not a "
            "service account's"
            + (
                f"; request one for audience {self.settings.audience}"
                if self.settings.audience
                else ""
            )
        )

    async def _ask(self, key: bytes, token: str) -> str | None:
        spec: dict[str, Any] = {"token": token}
        if self.settings.audience:
            spec["audiences"] = [self.settings.audience]
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        url = self.settings.url.rstrip("/") + "/apis/authentication.k8s.io/v1/tokenreviews"
        headers = {"Authorization": f"Bearer {self._credential()}"}
        client = self._http()
        self.reviews += 1
        try:
            answer = await client.post(url, json=body, headers=headers)
        except httpx2.HTTPError as exc:
            # The exception names the URL and the failure, never the request's headers or body.
            raise self._unavailable(f"is unreachable ({type(exc).__name__})") from None
        if answer.status_code not in (200, 201):
            hint = (
                " (grant this runtime's service account create on tokenreviews: the chart's "
                "ClusterRoleBinding ankka-runtime-token-review)"
                if answer.status_code in (401, 403)
                else ""
            )
            raise self._unavailable(f"answered HTTP {answer.status_code}{hint}")
        try:
            status = answer.json().get("status") or {}
        except (ValueError, AttributeError):
            raise self._unavailable("answered something that is not a TokenReview") from None
        caller = self._verdict(status)
        if caller is None:
            self.refused.put(key, None, self.settings.refused_ttl)
            return None
        now = self._clock.now().timestamp()
        self.cache.put(key, caller, cache_seconds(token, ttl=self.settings.ttl, now=now))
        return caller

    def _verdict(self, status: dict[str, Any]) -> str | None:
        if status.get("authenticated") is not True:
            return None
        audience = self.settings.audience
        if audience and audience not in (status.get("audiences") or []):
            return None
        username = (status.get("user") or {}).get("username")
        return service_account_caller(username) if isinstance(username, str) else None
