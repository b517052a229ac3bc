"""Secrets are hidden from outside text: configured ones whatever their shape, and anything
shaped like a credential (issue 13, defect 3)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ankka._kernel.redact import REDACTED, forget_all, redact, redact_bytes, remember


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    forget_all()
    yield
    forget_all()


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("invalid api key: Bearer sk-live-0123456789abcdef", "sk-live-0123456789abcdef"),
        ("Authorization: bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"),
        ("bad key sk-ant-api03-XYZxyz0123", "sk-ant-api03-XYZxyz0123"),
        ("cannot reach https://user:hunter2secret@example.test/v1", "hunter2secret"),
        ("Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ],
)
def test_credential_shaped_tokens_are_hidden(text: str, secret: str) -> None:
    hidden = redact(text)
    assert secret not in hidden
    assert REDACTED in hidden
    assert secret.encode() not in redact_bytes(text.encode())


def test_a_configured_secret_of_any_shape_is_hidden_once_remembered() -> None:
    text = "the server says: key canary-7f3a9c2e is not valid"
    assert "canary-7f3a9c2e" in redact(text)
    remember("canary-7f3a9c2e")
    assert redact(text) == f"the server says: key {REDACTED} is not valid"


def test_short_values_and_the_placeholder_bearer_are_never_registered() -> None:
    remember("none", "abc", None, "")
    assert redact("none of abc") == "none of abc"


def test_ordinary_prose_is_left_alone() -> None:
    text = "the task was a bearer of bad news; ask-me later"
    assert redact(text) == text


def test_bytes_take_their_own_secrets() -> None:
    assert redact_bytes(b'{"message": "key opaque-key-1 refused"}', [b"opaque-key-1"]) == (
        b'{"message": "key [redacted] refused"}'
    )
