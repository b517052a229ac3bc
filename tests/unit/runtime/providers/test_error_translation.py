"""SDK exceptions become ankka's errors naming the configured provider, never the vendor;
a missing optional SDK is a configuration error naming the extra."""

from __future__ import annotations

import sys

import anthropic
import httpx2
import openai
import pytest

from ankka._kernel.errors import (
    ConfigurationError,
    ModelAuthenticationError,
    ModelError,
    ModelUnavailable,
)
from ankka.runtime.providers import anthropic as anthropic_provider
from ankka.runtime.providers import openai_sdk
from ankka.runtime.providers.registry import providers_from_environment

REQUEST = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")


def response(status: int, body: str) -> httpx2.Response:
    return httpx2.Response(status, request=REQUEST, content=body.encode())


def test_an_anthropic_overload_is_unavailable_with_the_bodys_message() -> None:
    body = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    exc = anthropic.APIStatusError("Anthropic says 529", response=response(529, body), body=None)
    error = anthropic_provider.translate_error("claude", exc, 30)
    assert isinstance(error, ModelUnavailable)
    assert error.http_status == 529
    assert "Overloaded" in str(error)
    assert "Anthropic" not in str(error)


def test_an_error_event_mid_stream_is_a_model_error_not_an_http_status() -> None:
    body = {"type": "error", "error": {"type": "api_error", "message": "stream broke"}}
    exc = anthropic.APIStatusError("mid-stream", response=response(200, ""), body=body)
    error = anthropic_provider.translate_error("claude", exc, 30)
    assert type(error) is ModelError
    assert "mid-stream: stream broke" in str(error)
    assert error.http_status is None


def test_an_openai_401_is_an_authentication_error_naming_the_configured_provider() -> None:
    body = '{"error":{"message":"Incorrect API key provided: sk-abc***xyz"}}'
    exc = openai.AuthenticationError("OpenAI: bad key", response=response(401, body), body=None)
    error = openai_sdk.translate_error("local", exc, 30)
    assert isinstance(error, ModelAuthenticationError)
    assert "model provider 'local'" in str(error)
    assert "OpenAI" not in str(error)


def test_an_anthropic_model_without_the_sdk_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # as if not installed
    environ = {
        "ANKKA_MODEL_CLAUDE_PRESET": "anthropic",
        "ANKKA_MODEL_CLAUDE_MODEL": "claude-sonnet-4-5",
        "ANKKA_MODEL_CLAUDE_API_KEY": "sk-ant-secret",
    }
    with pytest.raises(ConfigurationError) as caught:
        providers_from_environment(environ)
    assert "pip install 'ankka[anthropic]'" in str(caught.value)
    assert "sk-ant-secret" not in str(caught.value)
