"""Certificates: identities in URI SANs, renewal at two thirds of life, key/cert matching."""

from __future__ import annotations

import datetime as dt

import pytest

from ankka.operator import certs
from ankka.operator.tlssecrets import certificate_secret, pair_of, uri_of

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
CA = certs.new_ca(now=NOW)


def test_agent_certificate_names_its_service_identity() -> None:
    uri = certs.agent_uri("shop", "cart")
    pair = certs.issue(CA, uri=uri, now=NOW)
    assert certs.uris_of(pair.cert_pem) == ["ankka://service/shop/cart"]
    assert certs.matches(pair)


def test_gateway_certificate_names_the_platform_models_identity_and_dns() -> None:
    pair = certs.issue(
        CA, uri=certs.GATEWAY_URI, now=NOW, server=True, dns_names=("ankka-gateway",)
    )
    assert certs.uris_of(pair.cert_pem) == ["ankka://platform/models"]


def test_renewal_is_due_at_two_thirds_of_life_not_before() -> None:
    uri = certs.agent_uri("shop", "cart")
    pair = certs.issue(CA, uri=uri, now=NOW, lifetime=dt.timedelta(hours=24))
    assert certs.needs_renewal(pair, ca=CA, uri=uri, now=NOW + dt.timedelta(hours=15)) is None
    assert certs.needs_renewal(pair, ca=CA, uri=uri, now=NOW + dt.timedelta(hours=16)) == (
        "two thirds of its life have passed"
    )


def test_a_key_from_another_certificate_is_detected() -> None:
    uri = certs.agent_uri("shop", "cart")
    a, b = certs.issue(CA, uri=uri, now=NOW), certs.issue(CA, uri=uri, now=NOW)
    mixed = certs.KeyPair(cert_pem=a.cert_pem, key_pem=b.key_pem)
    assert not certs.matches(mixed)
    assert certs.needs_renewal(mixed, ca=CA, uri=uri, now=NOW) is not None


def test_certificate_from_another_ca_or_identity_is_reissued() -> None:
    uri = certs.agent_uri("shop", "cart")
    other = certs.new_ca(now=NOW)
    assert certs.needs_renewal(certs.issue(other, uri=uri, now=NOW), ca=CA, uri=uri, now=NOW)
    wrong = certs.issue(CA, uri=certs.agent_uri("shop", "other"), now=NOW)
    assert certs.needs_renewal(wrong, ca=CA, uri=uri, now=NOW)


def test_secret_round_trips_the_pair_and_its_identity() -> None:
    uri = certs.agent_uri("shop", "cart")
    pair = certs.issue(CA, uri=uri, now=NOW)
    secret = certificate_secret(
        namespace="shop", name="cart-tls", pair=pair, ca_cert_pem=CA.cert_pem, uri=uri, role="agent"
    )
    assert pair_of(secret) == pair
    assert uri_of(secret) == uri
    assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        certs.issue(CA, uri="ankka://x", now=dt.datetime(2026, 1, 1))
