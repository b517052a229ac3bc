"""Mutual TLS for a server whose certificates rotate on disk: reload with no restart.

The operator issues short-lived certificates into a Secret mounted as a directory
(``tls.crt``, ``tls.key``, ``ca.crt``); Kubernetes replaces the files by swapping a symlink.
:class:`ReloadingServerTLS` builds an :class:`ssl.SSLContext` that requires a client
certificate from the CA, watches the files, and on change builds a fresh context. The listening
socket keeps one context whose ``sni_callback`` (called for every handshake, with or without a
server name) moves the new connection onto the current context, so new handshakes see the new
certificate and CA at once while connections already open keep theirs: nothing in flight is
dropped. A half-written set of files fails to load and is retried on the next tick; the
previous context stays in service meanwhile.

Used by ``ankka gateway`` (through :mod:`ankka._kernel.serve`). Standard library only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from pathlib import Path
from types import TracebackType
from typing import Any

from ankka._kernel.errors import ConfigurationError

__all__ = ["ReloadingServerTLS", "TLSFilesError", "peer_uri_sans"]

log = logging.getLogger("ankka.tls")

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
CA_FILE = "ca.crt"


class TLSFilesError(ConfigurationError):
    """The certificate, key or CA cannot be loaded; the message names the directory.

    Whoever mounts the certificate directory must fix it (in a cluster: the operator's
    Secret, mounted without ``subPath``).
    """

    kind = "tls_files_error"


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def peer_uri_sans(peercert: Any) -> tuple[str, ...]:
    """The URI subject alternative names of a verified peer certificate (``getpeercert()``)."""
    if not isinstance(peercert, dict):
        return ()
    return tuple(
        value
        for kind, value in peercert.get("subjectAltName", ())
        if kind == "URI" and isinstance(value, str)
    )


class ReloadingServerTLS:
    """A server-side mTLS context over a directory of PEM files that may change at any time."""

    def __init__(
        self, directory: str | Path, *, interval_s: float = 1.0, require_client: bool = True
    ) -> None:
        """``require_client=False`` asks for a client certificate but lets a client without
        one finish the handshake (it must then be identified another way, e.g. a token); a
        certificate that is sent is verified against the CA either way."""
        self.directory = Path(directory)
        self.interval_s = interval_s
        self.require_client = require_client
        self._paths = tuple(self.directory / name for name in (CERT_FILE, KEY_FILE, CA_FILE))
        self._stamps = self._read_stamps()
        self.current = self._build()
        # The context the socket listens with; it hands each handshake to ``current``.
        self.context = self._build()
        self.context.sni_callback = self._choose
        self.reloads = 0
        self._watcher: asyncio.Task[None] | None = None

    def _read_stamps(self) -> tuple[tuple[int, int, int], ...]:
        try:
            return tuple(_stamp(p) for p in self._paths)
        except OSError as exc:
            raise TLSFilesError(
                f"cannot read {exc.filename}: {exc.strerror}; the TLS directory "
                f"{self.directory} must hold {CERT_FILE}, {KEY_FILE} and {CA_FILE}"
            ) from exc

    def _build(self) -> ssl.SSLContext:
        cert, key, ca = self._paths
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.verify_mode = ssl.CERT_REQUIRED if self.require_client else ssl.CERT_OPTIONAL
        try:
            context.load_cert_chain(cert, key)
            context.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            raise TLSFilesError(
                f"cannot load the certificate, key and CA from {self.directory}: {exc}"
            ) from exc
        return context

    def _choose(self, connection: Any, server_name: str | None, _: ssl.SSLContext) -> None:
        connection.context = self.current

    def reload_if_changed(self) -> bool:
        """Swap in a new context when the files changed and load; True when it did."""
        try:
            stamps = self._read_stamps()
        except TLSFilesError:
            return False  # mid-swap: try again on the next tick
        if stamps == self._stamps:
            return False
        try:
            fresh = self._build()
        except TLSFilesError as exc:
            log.warning("%s; keeping the previous certificates until the files load", exc)
            return False
        self.current = fresh
        self._stamps = stamps
        self.reloads += 1
        log.info("TLS certificates reloaded from %s", self.directory)
        return True

    async def watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self.reload_if_changed()

    async def __aenter__(self) -> ReloadingServerTLS:
        self._watcher = asyncio.get_running_loop().create_task(
            self.watch(), name="ankka-tls-reload"
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
