"""What a failed look at a remote A2A child logs: never the peer's own text, which can echo a
request's header value."""

from __future__ import annotations

import httpx
from a2a.client.errors import A2AClientError, A2AClientTimeoutError, AgentCardResolutionError
from a2a.utils.errors import A2AError

from ankka._kernel.errors import StoreError
from ankka.runtime.drivers.tasks.remote_a2a import described

CANARY = "Bearer sk-canary-9f2c"


def test_an_a2a_error_is_logged_by_its_type_and_status_never_its_text() -> None:
    for exc, said in [
        (A2AClientError(f"peer said: {CANARY}"), "A2AClientError"),
        (A2AError(f"echo {CANARY}"), "A2AError"),
        (A2AClientTimeoutError(CANARY), "A2AClientTimeoutError"),
        (AgentCardResolutionError(CANARY, status_code=401), "AgentCardResolutionError (HTTP 401)"),
    ]:
        assert described(exc) == said
        assert "canary" not in described(exc)


def test_the_store_s_and_the_network_s_own_words_are_kept() -> None:
    assert described(StoreError("the store is unavailable")) == "the store is unavailable"
    assert described(httpx.ConnectError("All connection attempts failed")) == (
        "All connection attempts failed"
    )
    assert described(httpx.ReadTimeout("")) == "ReadTimeout"
