"""How providers fail: named for the provider the service configured, never the SDK's vendor,
with the status and a summary of the body, and with the key nowhere in the message."""

from __future__ import annotations

import socket

import pytest

from ankka._kernel.errors import (
    ModelAuthenticationError,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
)
from ankka.runtime.providers.base import ModelProvider, ModelRequest
from ankka.runtime.records.messages import UserMessage
from tests.integration.providers.conftest import (
    STANDIN_KEY,
    WIRES,
    Build,
    Standin,
    settings_for,
)

pytestmark = pytest.mark.integration

HELLO = ModelRequest("", [UserMessage("Hello?")])
VENDOR_WORDS = ("openai", "anthropic", "OpenAI", "Anthropic")


@pytest.fixture(params=WIRES)
def wire(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def assert_names_only_the_configured_provider(error: ModelError, name: str) -> None:
    assert error.provider == name
    assert f"model provider {name!r}" in str(error)
    for word in VENDOR_WORDS:
        assert word not in str(error), f"the SDK's vendor leaked into: {error}"


async def drain(provider: ModelProvider, request: ModelRequest) -> None:
    async for _ in provider.stream(request):
        pass


async def test_a_wrong_key_is_an_authentication_error_that_does_not_show_the_key(
    wire: str, keyed_standin: Standin, build: Build
) -> None:
    wrong = "sk-wrong-key-abcdefghijklmnop"
    provider = build("brain", **settings_for(wire, keyed_standin, api_key=wrong))

    with pytest.raises(ModelAuthenticationError) as caught:
        await provider.complete(HELLO)

    assert caught.value.http_status == 401
    assert "different API key" in str(caught.value), "the body's own message is summarized"
    assert_names_only_the_configured_provider(caught.value, "brain")
    assert wrong not in str(caught.value)
    assert STANDIN_KEY not in str(caught.value)
    assert wrong not in repr(provider)


async def test_the_right_key_is_accepted(wire: str, keyed_standin: Standin, build: Build) -> None:
    keyed_standin.script(["Welcome."])
    provider = build("brain", **settings_for(wire, keyed_standin, api_key=STANDIN_KEY))

    assert (await provider.complete(HELLO)).content == "Welcome."


async def test_a_server_that_is_down_is_unavailable(wire: str, build: Build) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}" + ("" if wire == "anthropic" else "/v1")
    key = {} if wire == "openai-compatible" else {"api_key": "k"}
    provider = build("down", preset=wire, model="m", url=base, timeout="5", **key)

    with pytest.raises(ModelUnavailable) as caught:
        await provider.complete(HELLO)

    assert "cannot reach the server" in str(caught.value)
    assert_names_only_the_configured_provider(caught.value, "down")


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_overloaded_server_is_unavailable_with_status_and_body(
    wire: str, streamed: bool, standin: Standin, build: Build
) -> None:
    # The SDKs retry nothing (ankka's one retry layer is above the provider, retry.py):
    # one call is one request, on every wire.
    turns = [{"status": 503, "text": "the pool is saturated, try later"}] * 4
    standin.script(turns)
    provider = build("busy", **settings_for(wire, standin))

    with pytest.raises(ModelUnavailable) as caught:
        await (drain(provider, HELLO) if streamed else provider.complete(HELLO))

    assert caught.value.http_status == 503
    assert "the pool is saturated, try later" in str(caught.value)
    assert_names_only_the_configured_provider(caught.value, "busy")
    assert len([r for r in standin.requests() if r["path"] != "/api/show"]) == 1


async def test_a_refused_request_is_a_model_error_with_the_status(
    wire: str, standin: Standin, build: Build
) -> None:
    standin.script([{"status": 400, "text": "messages: field required"}])
    provider = build("picky", **settings_for(wire, standin))

    with pytest.raises(ModelError) as caught:
        await provider.complete(HELLO)

    assert type(caught.value) is ModelError
    assert caught.value.http_status == 400
    assert "messages: field required" in str(caught.value)


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_model_slower_than_its_timeout_is_a_timeout(
    wire: str, streamed: bool, standin: Standin, build: Build
) -> None:
    # Three slow turns: however the SDK retries, the one deadline covers the whole call.
    standin.script([{"text": "late", "delay_ms": 3000}] * 3)
    provider = build("slow", **settings_for(wire, standin, timeout="0.5"))

    with pytest.raises(ModelTimeout) as caught:
        await (drain(provider, HELLO) if streamed else provider.complete(HELLO))

    assert "model timeout of 0.5s" in str(caught.value)
    assert_names_only_the_configured_provider(caught.value, "slow")


async def test_a_long_model_call_within_its_timeout_is_not_cut_by_a_shorter_http_timeout(
    standin: Standin, build: Build
) -> None:
    # httpx's own default timeout is 5 s: a model answering after 5.5 s, with a model timeout
    # of 30 s, must answer, not fail with a transport timeout nobody configured.
    standin.script([{"text": "Worth the wait.", "delay_ms": 5500}])
    provider = build("patient", **settings_for("openai-compatible", standin, timeout="30"))

    answer = await provider.complete(HELLO)

    assert answer.content == "Worth the wait."
    assert len(standin.requests()) == 1, "answered by the first attempt, no retry"
