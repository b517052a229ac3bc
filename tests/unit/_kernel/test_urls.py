"""Addresses are checked at start, on both sides, naming the setting (issue 32)."""

from __future__ import annotations

import pytest

from ankka._kernel.errors import ConfigurationError
from ankka._kernel.urls import http_url
from ankka.gateway.models_file import ModelsFileError, parse_models
from ankka.runtime.providers.config import parse_environment


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("localhost:28091/v1", "is not an http:// or https:// URL"),
        ("127.0.0.1:8080", "is not an http:// or https:// URL"),
        ("ftp://host/v1", "is not an http:// or https:// URL"),
        ("http:///v1", "names no host"),
        ("http://host:99999/v1", "is not a URL"),
        ("http://host:port/v1", "is not a URL"),
    ],
)
def test_a_url_that_is_none_is_refused_naming_the_setting(value: str, says: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        http_url(value, setting="THE_SETTING")
    assert str(raised.value).startswith("THE_SETTING=")
    assert says in str(raised.value)


def test_a_password_in_a_refused_url_is_not_shown() -> None:
    with pytest.raises(ConfigurationError) as raised:
        http_url("ftp://user:hunter2-secret@host/v1", setting="S")
    assert "hunter2-secret" not in str(raised.value)


def test_good_urls_pass() -> None:
    for value in ("http://127.0.0.1:8080/v1", "https://api.example.com", "http://[::1]:80/x"):
        assert http_url(value, setting="S") == value


def test_the_runtime_refuses_a_scheme_less_model_url_at_start() -> None:
    env = {
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": "localhost:28091/v1",
        "ANKKA_MODEL_DEFAULT_MODEL": "m",
    }
    with pytest.raises(ConfigurationError, match=r"^ANKKA_MODEL_DEFAULT_URL='localhost:28091"):
        parse_environment(env)
    env = {
        "ANKKA_MODEL_DEFAULT_PRESET": "installation",
        "ANKKA_MODEL_DEFAULT_MODEL": "m",
        "ANKKA_MODELS_ADDRESS": "ankka-gateway:8443",
        "ANKKA_TLS_DIR": "/tls",
    }
    with pytest.raises(ConfigurationError, match=r"^ANKKA_MODELS_ADDRESS='ankka-gateway:8443'"):
        parse_environment(env)


def test_the_gateway_refuses_a_scheme_less_url_in_its_models_file() -> None:
    with pytest.raises(
        ModelsFileError, match=r"model 'a': 'url' must be .*: url='localhost:11434' is not an http"
    ):
        parse_models([{"name": "a", "kind": "ollama", "url": "localhost:11434"}])
    with pytest.raises(ModelsFileError, match="names no host"):
        parse_models([{"name": "a", "kind": "ollama", "url": "http://"}])
