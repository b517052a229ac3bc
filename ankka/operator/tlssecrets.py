"""Certificates as Kubernetes Secrets: the CA's, an agent's, the gateway's.

Pure: turns a :class:`~ankka.operator.certs.KeyPair` into a Secret body and back. A leaf
Secret carries ``tls.crt``, ``tls.key`` and ``ca.crt`` together, so the single write that
replaces it replaces all three at once; pods mount it as a directory (no ``subPath``), which the
kubelet updates atomically by swapping a symlink.

The labels and annotations say what a Secret is to a person (``kubectl get secret -l
ankka.dev/certificate``): ``ankka.dev/uri``, ``ankka.dev/dns-names`` and the renewal time. The
operator judges an Agent's certificate from the Agent's status, never by reading the Secret
(``ankka.operator.certificates``).
"""

from __future__ import annotations

import base64
from typing import Any

from ankka.operator.certs import KeyPair, renew_at
from ankka.operator.objects import Obj, timestamp

__all__ = [
    "CERT_LABEL",
    "ca_secret",
    "certificate_secret",
    "dns_names_of",
    "pair_of",
    "uri_of",
]

CERT_LABEL = "ankka.dev/certificate"
_URI = "ankka.dev/uri"
_DNS = "ankka.dev/dns-names"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _unb64(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value).decode()
    except ValueError:
        return None


def ca_secret(namespace: str, name: str, ca: KeyPair) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "ankka", "ankka.dev/role": "ca"},
        },
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": _b64(ca.cert_pem), "tls.key": _b64(ca.key_pem)},
    }


def certificate_secret(
    *,
    namespace: str,
    name: str,
    pair: KeyPair,
    ca_cert_pem: str,
    uri: str,
    role: str,
    dns_names: tuple[str, ...] = (),
    owners: list[dict[str, Any]] | None = None,
) -> Obj:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/part-of": "ankka", CERT_LABEL: role},
        "annotations": {
            _URI: uri,
            _DNS: ",".join(dns_names),
            "ankka.dev/renew-at": timestamp(renew_at(pair.cert_pem)),
        },
    }
    if owners:
        metadata["ownerReferences"] = owners
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": _b64(pair.cert_pem),
            "tls.key": _b64(pair.key_pem),
            "ca.crt": _b64(ca_cert_pem),
        },
    }


def pair_of(secret: Obj | None) -> KeyPair | None:
    """The key pair a Secret holds, or None when it is absent or incomplete."""
    if not secret:
        return None
    data = secret.get("data") or {}
    cert, key = _unb64(data.get("tls.crt")), _unb64(data.get("tls.key"))
    if not cert or not key:
        return None
    return KeyPair(cert_pem=cert, key_pem=key)


def uri_of(secret: Obj) -> str | None:
    value = ((secret.get("metadata") or {}).get("annotations") or {}).get(_URI)
    return value if isinstance(value, str) and value else None


def dns_names_of(secret: Obj) -> tuple[str, ...]:
    value = ((secret.get("metadata") or {}).get("annotations") or {}).get(_DNS) or ""
    return tuple(n for n in str(value).split(",") if n)
