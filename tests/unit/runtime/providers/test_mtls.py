"""The installation client's TLS: the URI SAN pin and reloading the folder on change."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.providers.mtls import MODELS_URI, RotatingClientTLS, check_uri
from tests.support.certs import new_ca, write_tls_dir

CA = new_ca("platform")


def der(pem: bytes) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding

    return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)


def test_a_certificate_with_the_models_uri_passes() -> None:
    check_uri(der(CA.leaf("gateway", uris=(MODELS_URI,)).cert_pem), MODELS_URI)


@pytest.mark.parametrize("uris", [(), ("ankka://platform/other",)])
def test_a_certificate_without_the_models_uri_is_refused_saying_what_it_carries(
    uris: tuple[str, ...],
) -> None:
    leaf = CA.leaf("gateway", uris=uris, dns=("ankka-models",))
    with pytest.raises(ssl.SSLCertVerificationError) as caught:
        check_uri(der(leaf.cert_pem), MODELS_URI)
    assert MODELS_URI in str(caught.value)
    assert (uris[0] if uris else "none") in str(caught.value)


def test_the_context_is_rebuilt_only_when_the_files_change(tmp_path: Path) -> None:
    write_tls_dir(tmp_path, leaf=CA.leaf("svc", client=True), ca_pem=CA.pem)
    tls = RotatingClientTLS(tmp_path)
    first = tls.current()
    assert tls.current() is first
    write_tls_dir(tmp_path, leaf=CA.leaf("svc", client=True), ca_pem=CA.pem)
    assert tls.current() is not first
    assert tls.generation == 2


def test_a_half_written_rotation_keeps_the_previous_context(tmp_path: Path) -> None:
    write_tls_dir(tmp_path, leaf=CA.leaf("svc", client=True), ca_pem=CA.pem)
    tls = RotatingClientTLS(tmp_path)
    first = tls.current()
    other = CA.leaf("svc", client=True)
    (tmp_path / "tls.crt").write_bytes(other.cert_pem)  # the key is not rotated yet
    assert tls.current() is first
    (tmp_path / "tls.key").write_bytes(other.key_pem)
    assert tls.current() is not first


def test_unusable_files_are_refused_without_showing_the_key(tmp_path: Path) -> None:
    leaf = CA.leaf("svc", client=True)
    write_tls_dir(tmp_path, leaf=leaf, ca_pem=CA.pem)
    (tmp_path / "tls.key").write_bytes(CA.leaf("other", client=True).key_pem)
    with pytest.raises(ConfigurationError) as caught:
        RotatingClientTLS(tmp_path).current()
    assert "matching PEM pair" in str(caught.value)
    assert "PRIVATE KEY" not in str(caught.value)
