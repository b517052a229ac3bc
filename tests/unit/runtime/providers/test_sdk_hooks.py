"""The SDK internals ankka's lean client leans on still exist in the installed versions.

``providers/lean_http.LeanClient`` overrides httpx2's ``AsyncClient.build_request`` and
``send`` and wraps bodies in ``httpx2._client.BoundAsyncStream``; ``openai_sdk.Client``
overrides the OpenAI client's ``_prepare_url``. None of these is public API: if an upgrade of
httpx2 or openai renames one, the override would be skipped in silence (slower, not wrong) or
fail at import. These tests make such an upgrade fail here first, by name.
"""

from __future__ import annotations

import inspect

import httpx2
import openai
from httpx2 import _client as httpx2_client

from ankka.runtime.providers import openai_sdk
from ankka.runtime.providers.lean_http import LeanClient


def test_httpx2_still_has_the_hooks_the_lean_client_overrides() -> None:
    for name in ("build_request", "send", "_transport_for_url", "_build_redirect_request"):
        assert callable(getattr(httpx2.AsyncClient, name, None)), name
    assert hasattr(httpx2_client, "BoundAsyncStream")
    assert hasattr(httpx2_client, "UseClientDefault")
    sent = inspect.signature(httpx2.AsyncClient.send).parameters
    assert {"request", "stream", "auth", "follow_redirects"} <= set(sent)
    assert issubclass(LeanClient, httpx2.AsyncClient)


def test_openai_still_joins_urls_in_the_method_the_client_overrides() -> None:
    own = openai.AsyncOpenAI._prepare_url
    assert callable(own)
    assert list(inspect.signature(own).parameters) == ["self", "url"]
    assert openai_sdk.Client._prepare_url is not own
