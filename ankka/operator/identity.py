"""The operator's own client identity, ``ankka://platform/operator``, and how it checks a runtime.

The operator hands Tasks to runtimes over mTLS. Its certificate is issued by the platform CA it
already holds (:attr:`ankka.operator.reconcile.Platform.ca`), kept in memory only (no Secret:
nobody else needs it) and issued again at two thirds of its life, like every certificate of the
platform. A runtime is checked by the CA and by its URI SAN, ``ankka://service/<ns>/<agent>``,
not by host name: a development runtime outside the cluster is reached at
``https://127.0.0.1:PORT`` with the Agent's own certificate, and that is still checked.

The URI check runs inside the TLS handshake (an :class:`ssl.SSLObject` subclass), so nothing,
not even the request line, is sent to a runtime that is not the Agent's. Callers build one
context per expected identity (:meth:`OperatorIdentity.context_for`) and build it again when
:attr:`OperatorIdentity.generation` moves (a renewed certificate).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from ankka._kernel.clock import Clock
from ankka._kernel.errors import DependencyFailed
from ankka._kernel.tls import peer_uri_sans
from ankka.operator import certs

__all__ = ["OperatorIdentity", "WrongRuntimeIdentity", "client_context"]


class WrongRuntimeIdentity(ssl.SSLCertVerificationError, DependencyFailed):
    """The runtime's certificate is the platform's, but names someone else.

    An ``ssl`` error because it is raised inside the handshake (so nothing is sent), and an
    ``AnkkaError`` so whoever catches ankka's root sees it.
    """

    kind = "wrong_runtime_identity"
    status = 502

    def __init__(self, expected: str, presented: tuple[str, ...]) -> None:
        self.expected = expected
        self.presented = presented
        shown = ", ".join(presented) or "no URI SAN"
        super().__init__(f"the runtime's certificate names {shown}, not {expected}")


def _checked_object(expected: str) -> type[ssl.SSLObject]:
    class Checked(ssl.SSLObject):
        expected_uri: ClassVar[str] = expected

        def do_handshake(self) -> None:
            super().do_handshake()
            presented = peer_uri_sans(self.getpeercert())
            if self.expected_uri not in presented:
                raise WrongRuntimeIdentity(self.expected_uri, presented)

    return Checked


@contextlib.contextmanager
def _pem_files(pair: certs.KeyPair) -> Iterator[tuple[str, str]]:
    """The pair as two file names for :meth:`ssl.SSLContext.load_cert_chain`: anonymous memory
    files where the system has them (the key never touches a disk), else a private directory
    removed at once."""
    if hasattr(os, "memfd_create"):
        fds = [os.memfd_create(n, os.MFD_CLOEXEC) for n in ("operator.crt", "operator.key")]
        try:
            for fd, text in zip(fds, (pair.cert_pem, pair.key_pem), strict=True):
                os.write(fd, text.encode())
            yield f"/proc/self/fd/{fds[0]}", f"/proc/self/fd/{fds[1]}"
        finally:
            for fd in fds:
                os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="ankka-operator-") as directory:
        cert, key = Path(directory) / "tls.crt", Path(directory) / "tls.key"
        cert.write_text(pair.cert_pem)
        key.touch(mode=0o600)
        key.write_text(pair.key_pem)
        yield str(cert), str(key)


def client_context(ca_pem: str, pair: certs.KeyPair, expected_uri: str) -> ssl.SSLContext:
    """A client context presenting ``pair`` that trusts only the platform CA and accepts a
    server only if its certificate names ``expected_uri`` (host names are not checked)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False  # the identity is the URI SAN, checked in the handshake
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata=ca_pem)
    with _pem_files(pair) as (cert, key):
        context.load_cert_chain(cert, key)
    context.sslobject_class = _checked_object(expected_uri)
    return context


class OperatorIdentity:
    """The operator's certificate, issued from ``ca`` when first asked and again when due."""

    def __init__(self, ca: certs.KeyPair, *, lifetime: dt.timedelta, clock: Clock) -> None:
        self._ca = ca
        self._lifetime = lifetime
        self._clock = clock
        self._pair: certs.KeyPair | None = None
        self._renew_at: dt.datetime | None = None
        self.generation = 0

    def pair(self) -> certs.KeyPair:
        now = self._clock.now()
        if self._pair is None or self._renew_at is None or now >= self._renew_at:
            self._pair = certs.issue(
                self._ca, uri=certs.OPERATOR_URI, now=now, lifetime=self._lifetime
            )
            self._renew_at = certs.renew_at(self._pair.cert_pem)
            self.generation += 1
        return self._pair

    def context_for(self, expected_uri: str) -> ssl.SSLContext:
        """A context for calling the runtime named ``expected_uri``, with the current
        certificate (read :attr:`generation` after it to know when to build another)."""
        return client_context(self._ca.cert_pem, self.pair(), expected_uri)

    def due(self) -> bool:
        """Whether the certificate is due, so a context built before is stale."""
        return self._renew_at is None or self._clock.now() >= self._renew_at

    def __repr__(self) -> str:  # never the key
        return f"OperatorIdentity({certs.OPERATOR_URI}, generation {self.generation})"
