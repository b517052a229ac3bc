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


def test_an_agent_s_certificate_serves_its_service_names_and_calls_as_a_client() -> None:
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    uri, dns = certs.agent_uri("shop", "cart"), certs.agent_dns_names("shop", "cart")
    assert dns == ("cart", "cart.shop", "cart.shop.svc", "cart.shop.svc.cluster.local")
    pair = certs.issue(CA, uri=uri, now=NOW, server=True, client=True, dns_names=dns)
    assert certs.uris_of(pair.cert_pem) == [uri]
    assert certs.dns_names_of(pair.cert_pem) == list(dns)
    cert = x509.load_pem_x509_certificate(pair.cert_pem.encode())
    usages = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    assert usages == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    good = certs.needs_renewal(pair, ca=CA, uri=uri, now=NOW, dns_names=dns, server=True)
    assert good is None


def test_an_agent_s_client_only_certificate_is_reissued_as_a_server_one() -> None:
    # A certificate issued before runtimes served TLS: no DNS names, clientAuth only.
    uri, dns = certs.agent_uri("shop", "cart"), certs.agent_dns_names("shop", "cart")
    old = certs.issue(CA, uri=uri, now=NOW)
    why = certs.needs_renewal(old, ca=CA, uri=uri, now=NOW, dns_names=dns, server=True)
    assert why == "the certificate does not name cart"
    no_eku = certs.issue(CA, uri=uri, now=NOW, dns_names=dns)
    why = certs.needs_renewal(no_eku, ca=CA, uri=uri, now=NOW, dns_names=dns, server=True)
    assert why == "the certificate is not a server certificate"
