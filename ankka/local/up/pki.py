"""The local CA and the certificates ``ankka up`` gives the gateway and the runtime.

The CA is made on the first run and kept under the state directory; leaf certificates are
issued on every ``up`` (they are short-lived, as the operator's are). The identities are the
operator's: the gateway's server certificate carries ``ankka://platform/models``, the
runtime's client certificate ``ankka://service/<namespace>/<service>``. The builders are the
operator's own pure functions (:mod:`ankka.operator.certs`), so the two never drift.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from ankka.operator.certs import GATEWAY_URI, KeyPair, agent_uri, issue, matches, new_ca
from ankka.runtime.providers.mtls import CA_FILE, CERT_FILE, KEY_FILE

__all__ = ["LOCAL_NAMESPACE", "Issued", "ensure_ca", "issue_certificates"]

LOCAL_NAMESPACE = "local"  # the namespace ``up``'s identities name, as a cluster's would


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as sink:
        sink.write(text)


def ensure_ca(ca_dir: Path, *, now: dt.datetime) -> tuple[KeyPair, bool]:
    """The CA kept in ``ca_dir``, made when there is none (or it is torn); True when made."""
    cert, key = ca_dir / CERT_FILE, ca_dir / KEY_FILE
    if cert.exists() and key.exists():
        pair = KeyPair(cert_pem=cert.read_text(), key_pem=key.read_text())
        if matches(pair):
            return pair, False
    pair = new_ca(now=now, common_name="ankka local CA")
    _write_private(key, pair.key_pem)
    _write_private(cert, pair.cert_pem)
    return pair, True


def _write_tls_dir(folder: Path, pair: KeyPair, ca: KeyPair) -> None:
    _write_private(folder / KEY_FILE, pair.key_pem)
    _write_private(folder / CERT_FILE, pair.cert_pem)
    _write_private(folder / CA_FILE, ca.cert_pem)


@dataclass(frozen=True, slots=True)
class Issued:
    """The identities issued for one ``up``."""

    gateway_uri: str
    runtime_uri: str


def issue_certificates(
    ca: KeyPair, *, gateway_dir: Path, runtime_dir: Path, service: str, now: dt.datetime
) -> Issued:
    """Write the gateway's server certificate and the runtime's client certificate."""
    runtime_uri = agent_uri(LOCAL_NAMESPACE, service)
    gateway = issue(ca, uri=GATEWAY_URI, now=now, server=True, dns_names=("localhost",))
    _write_tls_dir(gateway_dir, gateway, ca)
    _write_tls_dir(runtime_dir, issue(ca, uri=runtime_uri, now=now), ca)
    return Issued(gateway_uri=GATEWAY_URI, runtime_uri=runtime_uri)
