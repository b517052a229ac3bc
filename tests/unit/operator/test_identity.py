"""The operator's own client identity: issued from the platform CA, renewed when due."""

from __future__ import annotations

import datetime as dt
import ssl

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from ankka._kernel.clock import ManualClock
from ankka.operator import certs
from ankka.operator.identity import OperatorIdentity
from ankka.operator.runtime_client import RuntimeClients

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
CA = certs.new_ca(now=NOW)


def test_the_operator_is_ankka_platform_operator_a_client_of_the_platform_ca() -> None:
    pair = OperatorIdentity(CA, lifetime=dt.timedelta(hours=24), clock=ManualClock(NOW)).pair()
    assert certs.uris_of(pair.cert_pem) == ["ankka://platform/operator"]
    cert = x509.load_pem_x509_certificate(pair.cert_pem.encode())
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH
    ]
    assert certs.needs_renewal(pair, ca=CA, uri=certs.OPERATOR_URI, now=NOW) is None


def test_the_operator_s_certificate_is_renewed_at_two_thirds_of_its_life() -> None:
    clock = ManualClock(NOW)
    identity = OperatorIdentity(CA, lifetime=dt.timedelta(hours=3), clock=clock)
    first = identity.pair()
    clock.advance(3600)
    assert identity.pair() == first and not identity.due() and identity.generation == 1
    clock.advance(3600 + 60)  # past two thirds (the certificate is backdated a minute)
    assert identity.due()
    second = identity.pair()
    assert second != first and identity.generation == 2 and not identity.due()


def test_a_runtime_is_checked_by_the_ca_and_its_uri_not_by_host_name() -> None:
    identity = OperatorIdentity(CA, lifetime=dt.timedelta(hours=1), clock=ManualClock(NOW))
    context = identity.context_for(certs.agent_uri("lab", "research"))
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is False  # https://127.0.0.1:PORT works for a dev runtime
    assert "ankka platform CA" in str(context.get_ca_certs())


async def test_a_daemon_s_mtls_client_is_built_again_once_the_certificate_is_renewed() -> None:
    clock = ManualClock(NOW)
    identity = OperatorIdentity(CA, lifetime=dt.timedelta(hours=3), clock=clock)
    research = certs.agent_uri("lab", "research")
    async with RuntimeClients(identity, timeout=5) as clients:
        first = await clients.get("https://127.0.0.1:8443", research)
        assert await clients.get("https://127.0.0.1:8443", research) is first
        plain = await clients.get("http://127.0.0.1:8000", research)
        assert plain is not first  # no certificate for a plain-HTTP development runtime
        clock.advance(2 * 3600 + 60)
        renewed = await clients.get("https://127.0.0.1:8443", research)
        assert renewed is not first and first.is_closed and identity.generation == 2
