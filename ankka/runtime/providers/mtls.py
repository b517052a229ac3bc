"""The service's client certificate for installation models: reloaded on change, pinned peer.

The operator mounts the service's certificate (``tls.crt``, ``tls.key``) and the platform's CA
(``ca.crt``) in one folder and rotates them in place. :class:`RotatingClientTLS` hands out an
:class:`ssl.SSLContext` built from the files as they are now: it looks at the files' stamps on
each use and builds a new context when they changed, so a rotated certificate is used with no
restart. If a rotation is caught half-written (a key that does not match its certificate), the
previous context is kept and the files are read again on the next use.

The context trusts only the platform's CA, and only a server certificate carrying the URI SAN
``ankka://platform/models``. Python's :mod:`ssl` checks DNS and IP names only, so the URI is
checked by :class:`_PinnedObject` as the handshake completes, before a byte of the request is
sent (:mod:`cryptography` reads the peer's certificate).
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from ankka._kernel.errors import ConfigurationError

__all__ = ["CA_FILE", "CERT_FILE", "KEY_FILE", "MODELS_URI", "RotatingClientTLS", "check_uri"]

MODELS_URI = "ankka://platform/models"
CERT_FILE, KEY_FILE, CA_FILE = "tls.crt", "tls.key", "ca.crt"


def check_uri(der: bytes | None, expected: str) -> None:
    """Raise :class:`ssl.SSLCertVerificationError` unless the certificate has URI SAN
    ``expected``."""
    if der is None:
        raise ssl.SSLCertVerificationError("the server presented no certificate")
    cert = x509.load_der_x509_certificate(der)
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        uris = names.get_values_for_type(x509.UniformResourceIdentifier)
    except x509.ExtensionNotFound:
        uris = []
    if expected not in uris:
        carried = ", ".join(uris) or "none"
        raise ssl.SSLCertVerificationError(
            f"the server's certificate is not the platform's models endpoint: it lacks the URI "
            f"SAN {expected} (URI SANs it carries: {carried})"
        )


class _PinnedObject(ssl.SSLObject):
    """The asyncio/anyio side of a TLS connection: checks the URI SAN after the handshake."""

    def do_handshake(self) -> None:
        super().do_handshake()
        context = self.context
        if isinstance(context, _PinnedContext):
            check_uri(self.getpeercert(binary_form=True), context.expected_uri)


class _PinnedSocket(ssl.SSLSocket):
    """The blocking side, for completeness (httpx2's sync client)."""

    def do_handshake(self, block: bool = False) -> None:
        super().do_handshake(block)
        context = self.context
        if isinstance(context, _PinnedContext):
            check_uri(self.getpeercert(binary_form=True), context.expected_uri)


class _PinnedContext(ssl.SSLContext):
    expected_uri: str = MODELS_URI


@dataclass(frozen=True, slots=True)
class _Stamp:
    files: tuple[tuple[int, int, int], ...]


class RotatingClientTLS:
    """Client TLS from a folder that is rotated in place. ``generation`` grows on each reload."""

    def __init__(self, directory: str | Path, *, expected_uri: str = MODELS_URI) -> None:
        self.directory = Path(directory)
        self.expected_uri = expected_uri
        self.generation = 0
        self._stamp: _Stamp | None = None
        self._context: ssl.SSLContext | None = None

    def __repr__(self) -> str:
        return f"RotatingClientTLS(directory={str(self.directory)!r}, generation={self.generation})"

    def _paths(self) -> tuple[Path, Path, Path]:
        return (
            self.directory / CERT_FILE,
            self.directory / KEY_FILE,
            self.directory / CA_FILE,
        )

    def _stamp_now(self) -> _Stamp:
        stamps = []
        for path in self._paths():
            try:
                st = os.stat(path)
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot read {path} ({exc.strerror}): the TLS folder must hold "
                    f"{CERT_FILE}, {KEY_FILE} and {CA_FILE}"
                ) from exc
            stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return _Stamp(tuple(stamps))

    def _build(self) -> ssl.SSLContext:
        cert, key, ca = self._paths()
        context = _PinnedContext(ssl.PROTOCOL_TLS_CLIENT)
        context.expected_uri = self.expected_uri
        context.sslobject_class = _PinnedObject
        context.sslsocket_class = _PinnedSocket
        # The server is named by its URI SAN, checked after the handshake; there is no DNS
        # name to check. The chain must still lead to the platform's CA, and only to it.
        context.check_hostname = False
        context.verify_mode = ssl.CERT_REQUIRED
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_verify_locations(cafile=str(ca))
            context.load_cert_chain(str(cert), str(key))
        except (ssl.SSLError, OSError) as exc:
            # Never the files' contents: the key is a secret.
            raise ConfigurationError(
                f"the TLS files in {self.directory} cannot be used ({type(exc).__name__}: "
                f"{getattr(exc, 'reason', None) or exc.strerror or 'unreadable'}); "
                f"{CERT_FILE} and {KEY_FILE} must be a matching PEM pair and {CA_FILE} a "
                "PEM CA certificate"
            ) from exc
        return context

    def current(self) -> ssl.SSLContext:
        """The context for the files as they are now (rebuilt only when they changed)."""
        stamp = self._stamp_now()
        if stamp != self._stamp or self._context is None:
            try:
                context = self._build()
            except ConfigurationError:
                if self._context is None:
                    raise
                return self._context  # a rotation caught half-way: try again next time
            self._context = context
            self._stamp = stamp
            self.generation += 1
        return self._context
