"""Keep secrets out of text that came from outside: upstream error bodies, exception messages.

An upstream that refuses a key often quotes it back (``invalid api key: Bearer sk-…``), and that
text would otherwise travel into a caller's error, a log line or the journal. Two rules, applied
together by :func:`redact`:

- every **configured** secret (a model's API key, registered with :func:`remember` when the
  configuration is read) is replaced wherever it appears, whatever its shape;
- anything **shaped** like a credential is replaced even when it was never configured: the
  token after ``Bearer``/``Basic``, a ``sk-…`` key, the password in a URL's ``user:pass@``.

The registry is process-wide on purpose: a secret configured anywhere must be hidden everywhere,
including from errors built far from the code that knows the key. Values shorter than
:data:`MIN_SECRET` (and the placeholder bearer ``none``) are not registered, so redaction can
never eat ordinary words. Pure string work; the gateway uses :func:`redact_bytes` with its own
keys on the bodies it relays.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

__all__ = ["MIN_SECRET", "REDACTED", "forget_all", "redact", "redact_bytes", "remember"]

REDACTED = "[redacted]"
MIN_SECRET = 6
_PLACEHOLDERS = frozenset({"none"})

_SHAPED = (
    r"(?i:\b(?:bearer|basic)\s+)([A-Za-z0-9._~+/=-]{4,})",
    r"\b(sk-[A-Za-z0-9_-]{6,})",
    r"://[^/@\s:]+:([^/@\s]+)@",
)
_SHAPED_TEXT = re.compile("|".join(_SHAPED))
_SHAPED_BYTES = re.compile("|".join(_SHAPED).encode())

_lock = threading.Lock()
_known: frozenset[str] = frozenset()


def remember(*secrets: str | None) -> None:
    """Register configured secrets so that :func:`redact` hides them from now on."""
    global _known
    fresh = {s for s in secrets if s and len(s) >= MIN_SECRET and s not in _PLACEHOLDERS}
    if fresh - _known:
        with _lock:
            _known = _known | fresh


def forget_all() -> None:
    """For tests only: drop every registered secret."""
    global _known
    with _lock:
        _known = frozenset()


def _shaped_text(match: re.Match[str]) -> str:
    group = next(i for i, g in enumerate(match.groups(), 1) if g is not None)
    start, end = match.span(group)
    whole = match.group(0)
    at = match.start(0)
    return whole[: start - at] + REDACTED + whole[end - at :]


def _shaped_bytes(match: re.Match[bytes]) -> bytes:
    group = next(i for i, g in enumerate(match.groups(), 1) if g is not None)
    start, end = match.span(group)
    whole = match.group(0)
    at = match.start(0)
    return whole[: start - at] + REDACTED.encode() + whole[end - at :]


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every configured (and given) secret and credential-shaped token hidden."""
    for secret in sorted({*_known, *secrets}, key=len, reverse=True):
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    return _SHAPED_TEXT.sub(_shaped_text, text)


def redact_bytes(data: bytes, secrets: Iterable[bytes] = ()) -> bytes:
    """:func:`redact` for bytes the gateway relays, with its own configured keys."""
    for secret in secrets:
        if len(secret) >= MIN_SECRET and secret in data:
            data = data.replace(secret, REDACTED.encode())
    return _SHAPED_BYTES.sub(_shaped_bytes, data)
