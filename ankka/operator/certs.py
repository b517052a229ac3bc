"""The platform's certificates: a CA, agents' certificates, the gateway's, the operator's.

Pure functions of their inputs (the clock is passed in), so issuance and the renewal decision
are tested without a cluster. The operator's handlers write what these return into Secrets in
one update, so a reader never sees one certificate's key with another's certificate.

Identities are URI SANs: ``ankka://service/<namespace>/<agent>`` for an agent's runtime (a
client certificate towards the gateway and a server certificate for its own Service, so it
also names the Service's DNS names), ``ankka://platform/models`` for the gateway (a server
certificate) and ``ankka://platform/operator`` for the operator (a client certificate, held in
memory: see :mod:`ankka.operator.identity`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ankka._kernel.errors import ConfigurationError

__all__ = [
    "GATEWAY_URI",
    "OPERATOR_URI",
    "KeyPair",
    "agent_dns_names",
    "agent_uri",
    "dns_names_of",
    "issue",
    "matches",
    "needs_renewal",
    "not_after",
    "new_ca",
    "profile",
    "renew_at",
    "uris_of",
]

GATEWAY_URI = "ankka://platform/models"
OPERATOR_URI = "ankka://platform/operator"
DEFAULT_LIFETIME = dt.timedelta(hours=24)
CA_LIFETIME = dt.timedelta(days=3650)
# Issued a little in the past so a peer whose clock lags slightly accepts a fresh certificate.
_BACKDATE = dt.timedelta(minutes=1)


def agent_uri(namespace: str, agent: str) -> str:
    return f"ankka://service/{namespace}/{agent}"


def agent_dns_names(namespace: str, agent: str) -> tuple[str, ...]:
    """The names an Agent's Service answers to, which its runtime's certificate serves."""
    svc = f"{agent}.{namespace}.svc"
    return (agent, f"{agent}.{namespace}", svc, f"{svc}.cluster.local")


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate and its private key, both PEM text."""

    cert_pem: str
    key_pem: str


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def new_ca(*, now: dt.datetime, common_name: str = "ankka platform CA") -> KeyPair:
    """A self-signed CA certificate for the platform."""
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + CA_LIFETIME)
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
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert_pem=_cert_pem(cert), key_pem=_key_pem(key))


def issue(
    ca: KeyPair,
    *,
    uri: str,
    now: dt.datetime,
    lifetime: dt.timedelta = DEFAULT_LIFETIME,
    server: bool = False,
    client: bool | None = None,
    dns_names: tuple[str, ...] = (),
) -> KeyPair:
    """A leaf certificate for ``uri`` signed by ``ca``, also naming ``dns_names``.

    Its extended key usage is serverAuth with ``server``, clientAuth with ``client`` (which
    defaults to ``not server``): an agent's runtime is both."""
    if now.tzinfo is None:
        raise ValueError("issue() needs an aware datetime (UTC); got a naive one")
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ConfigurationError("the CA key is not an EC key; recreate the CA Secret")
    key = _new_key()
    sans: list[x509.GeneralName] = [x509.UniformResourceIdentifier(uri)]
    sans += [x509.DNSName(n) for n in dns_names]
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    if (not server) if client is None else client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, uri[:64])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert_pem=_cert_pem(cert), key_pem=_key_pem(key))


def renew_at(cert_pem: str) -> dt.datetime:
    """When a certificate is due: two thirds of the way through its life."""
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * 2 / 3


def needs_renewal(
    pair: KeyPair | None,
    *,
    ca: KeyPair,
    uri: str,
    now: dt.datetime,
    dns_names: tuple[str, ...] = (),
    server: bool = False,
) -> str | None:
    """Why ``pair`` must be (re)issued, or None when it is still good: it must name ``uri``
    and every one of ``dns_names``, and serve (serverAuth) when ``server``."""
    if pair is None:
        return "no certificate yet"
    try:
        cert = x509.load_pem_x509_certificate(pair.cert_pem.encode())
    except ValueError:
        return "the stored certificate does not parse"
    if not matches(pair):
        return "the stored key does not match the certificate"
    if uri not in uris_of(pair.cert_pem):
        return f"the certificate does not name {uri}"
    missing = [n for n in dns_names if n not in dns_names_of(pair.cert_pem)]
    if missing:
        return f"the certificate does not name {missing[0]}"
    if server and ExtendedKeyUsageOID.SERVER_AUTH not in _usages(cert):
        return "the certificate is not a server certificate"
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return "the certificate was not signed by the platform CA"
    if now >= renew_at(pair.cert_pem):
        return "two thirds of its life have passed"
    return None


def profile(ca: KeyPair, *, uri: str, dns_names: tuple[str, ...]) -> str:
    """A short digest of what a leaf must be (its CA, its URI and DNS names): an Agent's
    status records it with the certificate, so the operator judges the certificate without
    reading its Secret (it reads no Secret outside its namespace): a new CA or new names
    change the profile, and the certificate is issued again."""
    ca_der = x509.load_pem_x509_certificate(ca.cert_pem.encode()).public_bytes(
        serialization.Encoding.DER
    )
    digest = hashes.Hash(hashes.SHA256())
    for part in (ca_der, uri.encode(), "\0".join(sorted(dns_names)).encode()):
        digest.update(len(part).to_bytes(4, "big") + part)
    return digest.finalize().hex()[:16]


def matches(pair: KeyPair) -> bool:
    """True when the private key is the certificate's."""
    try:
        cert = x509.load_pem_x509_certificate(pair.cert_pem.encode())
        key = serialization.load_pem_private_key(pair.key_pem.encode(), password=None)
    except ValueError:
        return False
    raw = serialization.PublicFormat.SubjectPublicKeyInfo
    enc = serialization.Encoding.DER
    return bool(cert.public_key().public_bytes(enc, raw) == key.public_key().public_bytes(enc, raw))


def _sans(cert_pem: str, kind: type[x509.UniformResourceIdentifier | x509.DNSName]) -> list[str]:
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return []
    return [str(v) for v in san.value.get_values_for_type(kind)]


def uris_of(cert_pem: str) -> list[str]:
    return _sans(cert_pem, x509.UniformResourceIdentifier)


def dns_names_of(cert_pem: str) -> list[str]:
    return _sans(cert_pem, x509.DNSName)


def _usages(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    try:
        return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        return []


def not_after(cert_pem: str) -> dt.datetime:
    return x509.load_pem_x509_certificate(cert_pem.encode()).not_valid_after_utc
