"""The one check of an HTTP address a setting names, made at start on every side.

A scheme-less value (``localhost:28091/v1``) parses as a URL whose scheme is ``localhost``:
accepted, every request to it would fail much later, far from the setting. So each address
setting (a model's ``_URL``, ``ANKKA_MODELS_ADDRESS``, an MCP server's ``_URL``, a gateway
models file's ``url``) goes through :func:`http_url`, which refuses it at start naming the
setting and showing the form it takes.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ankka._kernel.errors import ConfigurationError
from ankka._kernel.redact import redact

__all__ = ["http_url"]


def http_url(value: str, *, setting: str, example: str = "http://127.0.0.1:8080/v1") -> str:
    """``value`` stripped, when it is an ``http://`` or ``https://`` URL with a host and, if
    given, a valid port; otherwise a :class:`ConfigurationError` naming ``setting``."""
    text = value.strip()
    shown = redact(text[:120])  # a password in user:pass@ is never shown
    try:
        parts = urlsplit(text)
        port = parts.port  # ValueError when not a number from 0 to 65535
    except ValueError as exc:
        raise ConfigurationError(
            f"{setting}={shown!r} is not a URL ({exc}); write it as {example}"
        ) from None
    if parts.scheme not in ("http", "https"):
        raise ConfigurationError(
            f"{setting}={shown!r} is not an http:// or https:// URL; write it with its "
            f"scheme, e.g. {example}"
        )
    if not parts.hostname:
        raise ConfigurationError(f"{setting}={shown!r} names no host; e.g. {example}")
    if port == 0:
        raise ConfigurationError(f"{setting}={shown!r}: port 0 is no server's port")
    return text
