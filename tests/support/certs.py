"""Real X.509 certificates made in the test: a CA, a server and clients, as PEM files.

The gateway's and the installation provider's mTLS are tested with real handshakes, so their
certificates are real: ECDSA P-256,
with the URI SANs ankka uses (``ankka://platform/models`` for the gateway,
``ankka://service/<namespace>/<agent>`` for a caller). :func:`write_tls_dir` writes a directory
the way Kubernetes mounts a Secret (``tls.crt``, ``tls.key``, ``ca.crt``), each file replaced
atomically.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CA", "Issued", "client_context", "new_ca", "write_tls_dir"]

GATEWAY_URI = "ankka://platform/models"


@dataclass(frozen=True)
class Issued:
    cert_pem: bytes
    key_pem: bytes
    serial: int

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        cert.write_bytes(self.cert_pem)
        key.write_bytes(self.key_pem)
        return cert, key


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@dataclass(frozen=True)
class CA:
    name: str
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def cert_pem(self) -> bytes:
        return self.pem

    def issue(
        self, uri: str, *, server: bool = False, expired: bool = False, runtime: bool = False
    ) -> Issued:
        """A leaf for ``uri``: a client certificate, or (``server``) one for localhost too,
        or (``runtime``) one for both, as the operator issues an agent's runtime."""
        if server or runtime:
            return self.leaf(uri, uris=(uri,), dns=("localhost",), ips=("127.0.0.1",), both=runtime)
        return self.leaf(uri, uris=(uri,), client=True, expired=expired)

    def leaf(
        self,
        common_name: str,
        *,
        uris: tuple[str, ...] = (),
        dns: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
        client: bool = False,
        expired: bool = False,
        both: bool = False,
    ) -> Issued:
        """Any leaf this CA signs: the SANs given (none at all is allowed), client or server."""
        now = dt.datetime.now(dt.UTC)
        if expired:
            not_before, not_after = now - dt.timedelta(days=2), now - dt.timedelta(days=1)
        else:
            not_before, not_after = now - dt.timedelta(minutes=5), now + dt.timedelta(hours=24)
        key = ec.generate_private_key(ec.SECP256R1())
        names: list[x509.GeneralName] = [x509.UniformResourceIdentifier(u) for u in uris]
        names += [x509.DNSName(d) for d in dns]
        names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]
        if both:
            usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
        serial = x509.random_serial_number()
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(serial)
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key), serial)


def new_ca(name: str = "ankka platform CA") -> CA:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CA(name, key, cert)


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_tls_dir(directory: Path, *, leaf: Issued, ca_pem: bytes) -> Path:
    """Write (or replace) ``tls.crt``, ``tls.key`` and ``ca.crt``, key first, CA last, each
    swapped in whole as Kubernetes updates a mounted Secret."""
    directory.mkdir(parents=True, exist_ok=True)
    _replace(directory / "tls.key", leaf.key_pem)
    _replace(directory / "tls.crt", leaf.cert_pem)
    _replace(directory / "ca.crt", ca_pem)
    return directory


def client_context(
    trust: CA, client: Issued | None, directory: Path, *, stem: str = "client"
) -> ssl.SSLContext:
    """A client context trusting ``trust`` and presenting ``client`` (or no certificate)."""
    context = ssl.create_default_context(cadata=trust.pem.decode())
    if client is not None:
        cert, key = client.write(directory, stem)
        context.load_cert_chain(cert, key)
    return context
