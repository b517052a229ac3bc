"""Service-account tokens (TokenReview) in the runtime, without an API server: the cache's
bounds in size and time, which usernames name a caller, and the failures that need no server
(an unreachable API server is 503 naming TokenReview; no error or log quotes the token).
Against a real kube-apiserver: tests/cluster/test_token_review.py."""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import logging
import socket
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ankka._kernel.clock import ManualClock
from ankka._kernel.errors import ConfigurationError
from ankka.runtime.serve.cli import _identity, configure
from ankka.runtime.serve.identity import Identify, Unauthenticated
from ankka.runtime.serve.tokenreview import (
    MAX_TOKEN,
    ReviewCache,
    ReviewSettings,
    SourceRate,
    TokenRefused,
    TokenReviewer,
    TokenReviewUnavailable,
    TooManyReviews,
    cache_seconds,
    jwt_shaped,
    service_account_caller,
)

TOKEN_TEXT = "canary-token-5f1e2d3c4b5a69788796a5b4c3d2e1f0"


def clock() -> ManualClock:
    return ManualClock(datetime(2026, 1, 1, tzinfo=UTC))


def jwt(exp: float) -> str:
    def part(data: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part({'exp': exp, 'sub': 'x'})}.c2ln"


# Shaped as a service-account token is (a JWT), so it is worth asking about; a canary.
TOKEN = jwt(4_000_000_000).rsplit(".", 1)[0] + "." + TOKEN_TEXT


def test_the_cache_drops_the_least_recently_used_past_its_size() -> None:
    cache = ReviewCache(max_entries=2, clock=clock())
    cache.put(b"a", "system:serviceaccount:n:a", 60)
    cache.put(b"b", "system:serviceaccount:n:b", 60)
    assert cache.get(b"a") is not None  # a is now the most recent
    cache.put(b"c", "system:serviceaccount:n:c", 60)
    assert len(cache) == 2
    assert cache.get(b"b") is None
    assert cache.get(b"a") == ("system:serviceaccount:n:a",)


def test_a_verdict_expires_on_the_clock() -> None:
    c = clock()
    cache = ReviewCache(max_entries=8, clock=c)
    cache.put(b"ok", "system:serviceaccount:n:a", 60)
    cache.put(b"refused", None, 5)
    c.advance(5)
    assert cache.get(b"refused") is None
    assert cache.get(b"ok") == ("system:serviceaccount:n:a",)
    c.advance(55)
    assert cache.get(b"ok") is None
    assert len(cache) == 0


def test_an_accepted_token_is_not_kept_past_the_expiry_it_claims() -> None:
    assert cache_seconds(jwt(1030), ttl=60, now=1000) == 30
    assert cache_seconds(jwt(5000), ttl=60, now=1000) == 60
    assert cache_seconds(jwt(900), ttl=60, now=1000) < 0  # not cached at all
    assert cache_seconds("opaque", ttl=60, now=1000) == 60


@pytest.mark.parametrize(
    ("username", "caller"),
    [
        ("system:serviceaccount:shop:cart", "system:serviceaccount:shop:cart"),
        ("ankka://platform/operator", None),  # no other kind of user may claim a platform name
        ("alice@example.com", None),
        ("system:serviceaccount:shop", None),
        ("system:serviceaccount::cart", None),
        ("system:serviceaccount:shop:cart:x", None),
    ],
)
def test_only_a_service_account_names_a_caller(username: str, caller: str | None) -> None:
    assert service_account_caller(username) == caller


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _settings(tmp_path: Path, url: str) -> ReviewSettings:
    own = tmp_path / "token"
    own.write_text("runtime-own-token-0123456789")
    return ReviewSettings(url=url, credential_file=own, ca_file=None, timeout=2.0)


def test_an_unreachable_api_server_is_503_naming_token_review_never_the_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"https://127.0.0.1:{_closed_port()}"

    async def main() -> TokenReviewUnavailable:
        async with TokenReviewer(_settings(tmp_path, url)) as reviewer:
            with pytest.raises(TokenReviewUnavailable) as caught:
                await reviewer.review(TOKEN)
            assert len(reviewer.cache) == 0, "an outage is never cached"
            return caught.value

    with caplog.at_level(logging.DEBUG):
        error = asyncio.run(main())
    assert error.status == 503 and "TokenReview" in str(error) and url in str(error)
    assert TOKEN not in str(error) and TOKEN not in caplog.text
    assert "runtime-own-token" not in str(error) + caplog.text


def test_a_missing_credential_is_503_naming_the_file(tmp_path: Path) -> None:
    settings = ReviewSettings(
        url="https://127.0.0.1:1", credential_file=tmp_path / "absent", ca_file=None
    )

    async def main() -> str:
        async with TokenReviewer(settings) as reviewer:
            with pytest.raises(TokenReviewUnavailable) as caught:
                await reviewer.review(TOKEN)
            return str(caught.value)

    message = asyncio.run(main())
    assert str(tmp_path / "absent") in message and TOKEN not in message


def test_an_oversized_token_is_refused_without_asking(tmp_path: Path) -> None:
    async def main() -> int:
        async with TokenReviewer(_settings(tmp_path, "https://127.0.0.1:1")) as reviewer:
            with pytest.raises(TokenRefused):
                await reviewer.review("x" * (MAX_TOKEN + 1))
            return reviewer.reviews

    assert asyncio.run(main()) == 0


def test_with_token_review_a_caller_without_a_token_is_401_not_local(tmp_path: Path) -> None:
    reviewer = TokenReviewer(_settings(tmp_path, "https://127.0.0.1:1"))
    identify = Identify(tls=False, tokens=None, trust=False, reviewer=reviewer)
    with pytest.raises(Unauthenticated, match="service-account token"):
        asyncio.run(identify.resolve({"type": "http", "headers": []}))


def test_a_static_token_is_not_sent_for_review(tmp_path: Path) -> None:
    reviewer = TokenReviewer(_settings(tmp_path, "https://127.0.0.1:1"))
    identify = Identify(tls=False, tokens={TOKEN: "alice"}, trust=False, reviewer=reviewer)
    scope = {"type": "http", "headers": [(b"authorization", f"Bearer {TOKEN}".encode())]}
    assert asyncio.run(identify.resolve(scope)) == "alice"
    assert reviewer.reviews == 0


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.parse_args(["m:service", *argv])


def test_serve_refuses_a_plain_http_api_server(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigurationError, match="https:// only"):
        _identity(_args("--host", "0.0.0.0", "--token-review-url", "http://10.0.0.1"))


def test_token_review_alone_lets_serve_listen_off_loopback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = _args(
        "--host", "0.0.0.0", "--token-review-url", "https://10.0.0.1:6443",
        "--token-review-audience", "ankka://service/shop/cart",
    )  # fmt: skip
    _, tls, reviewer = _identity(args)
    assert tls is None and reviewer is not None
    assert reviewer.settings.audience == "ankka://service/shop/cart"
    said = capsys.readouterr().err
    assert "service-account token" in said and "TokenReview at https://10.0.0.1:6443" in said


def test_how_long_an_accepted_verdict_is_kept_is_a_setting_within_bounds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    review = ("--host", "0.0.0.0", "--token-review-url", "https://10.0.0.1:6443")
    _, _, reviewer = _identity(_args(*review))
    assert reviewer is not None and reviewer.settings.ttl == 60
    _, _, reviewer = _identity(_args(*review, "--token-review-cache-seconds", "600"))
    assert reviewer is not None and reviewer.settings.ttl == 600
    for bad in ("0", "-1", "86401", "nan"):
        with pytest.raises(ConfigurationError, match="--token-review-cache-seconds"):
            _identity(_args(*review, "--token-review-cache-seconds", bad))


def test_only_a_jwt_shaped_token_is_worth_a_review() -> None:
    assert jwt_shaped(TOKEN) and jwt_shaped(jwt(1))
    for junk in (TOKEN_TEXT, "a.b.c", "..", "e30.e30.e30", jwt(1) + ".x"):
        assert not jwt_shaped(junk), junk  # e30 is "{}": a JWT header names its alg


def test_a_token_that_is_no_jwt_is_refused_without_asking(tmp_path: Path) -> None:
    """Issue 31, item 9: a random bearer token cost a review each."""

    async def main() -> int:
        async with TokenReviewer(_settings(tmp_path, "https://127.0.0.1:1")) as reviewer:
            for n in range(50):
                with pytest.raises(TokenRefused):
                    await reviewer.review(f"random-bearer-{n:04d}-0123456789abcdef")
            return reviewer.reviews

    assert asyncio.run(main()) == 0


def test_one_address_gets_its_burst_of_reviews_then_waits_while_another_is_asked_for() -> None:
    c = clock()
    rate = SourceRate(per_second=5, burst=3, clock=c)
    assert [rate.take("10.0.0.9") for _ in range(3)] == [None, None, None]
    wait = rate.take("10.0.0.9")
    assert wait is not None and 0 < wait <= 0.2
    assert rate.take("10.0.0.1") is None, "another address has a bucket of its own"
    c.advance(0.2)
    assert rate.take("10.0.0.9") is None
    assert rate.take("10.0.0.9") is not None


def test_past_its_burst_an_address_is_429_and_the_api_server_is_not_asked(
    tmp_path: Path,
) -> None:
    settings = replace(_settings(tmp_path, f"https://127.0.0.1:{_closed_port()}"), review_burst=2)

    async def main() -> tuple[int, float]:
        async with TokenReviewer(settings, clock=clock()) as reviewer:
            for n in range(2):  # asked (the API server is out of reach: never cached)
                with pytest.raises(TokenReviewUnavailable):
                    await reviewer.review(jwt(n), source="10.0.0.9")
            with pytest.raises(TooManyReviews) as caught:
                await reviewer.review(jwt(3), source="10.0.0.9")
            with pytest.raises(TokenReviewUnavailable):
                await reviewer.review(jwt(4), source="10.0.0.1")
            return reviewer.reviews, caught.value.retry_after

    asked, wait = asyncio.run(main())
    assert asked == 3
    assert wait > 0
