"""Installation models over real mTLS: the stand-in served by uvicorn with certificates made
here, the provider built from the environment as a service builds it.

What must hold: only a server certificate from the platform's CA carrying the URI SAN
``ankka://platform/models`` is trusted; a rotated client certificate is used with no
restart; the capability check refuses before sending and caches only successes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ankka._kernel.errors import ModelUnavailable, Refused
from ankka.local.standin.server import StandinState, create_app
from ankka.runtime.declare.tools import ToolSpec
from ankka.runtime.providers.base import ModelProvider, ModelRequest
from ankka.runtime.providers.checked import CapabilityCheck
from ankka.runtime.providers.mtls import MODELS_URI
from ankka.runtime.providers.registry import providers_from_environment
from ankka.runtime.providers.script import parse_script
from ankka.runtime.records.messages import UserMessage
from tests.support.certs import CA, Issued, new_ca, write_tls_dir
from tests.support.tls_server import serve_tls

pytestmark = pytest.mark.integration

MODEL = "qwen3:4b"
HELLO = ModelRequest("", [UserMessage("Hello?")])
TOOL = ToolSpec("lookup", "Look something up", {"type": "object", "properties": {}})
SERVES_TOOLS = {"capabilities": ["completion", "tools"]}
COMPLETION_ONLY = {"capabilities": ["completion"]}


@dataclass
class Platform:
    """The platform's CA, a gateway stand-in behind TLS, and the service's TLS folder."""

    ca: CA
    tls_dir: Path
    address: str
    state: StandinState

    def script(self, turns: list[Any], models: dict[str, Any] | None = None) -> None:
        new = parse_script({"turns": turns, "models": models or {}})
        self.state.reset(new.turns)
        self.state.models = new.models

    def received(self) -> list[str]:
        return [r["path"] for r in self.state.requests]

    def client_leaf(self) -> Issued:
        return self.ca.leaf("service-a", uris=("ankka://service/a",), client=True)

    def provider(self, name: str = "brain", **more: str) -> CapabilityCheck:
        environ = {
            "ANKKA_MODELS_ADDRESS": self.address,
            "ANKKA_TLS_DIR": str(self.tls_dir),
            f"ANKKA_MODEL_{name.upper()}_PRESET": "installation",
            f"ANKKA_MODEL_{name.upper()}_MODEL": MODEL,
            **{f"ANKKA_MODEL_{name.upper()}_{k.upper()}": v for k, v in more.items()},
        }
        provider = providers_from_environment(environ)[name]
        assert isinstance(provider, CapabilityCheck)
        return provider


Serve = Callable[..., AbstractAsyncContextManager[Platform]]


@pytest.fixture
def platform_factory(tmp_path: Path) -> Serve:
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def serve(
        *, uris: tuple[str, ...] = (MODELS_URI,), server_ca: CA | None = None
    ) -> AsyncIterator[Platform]:
        ca = new_ca("ankka platform CA")
        issuer = server_ca or ca
        server = issuer.leaf("gateway", uris=uris, dns=("localhost",), ips=("127.0.0.1",))
        server_dir = tmp_path / "server"
        server_dir.mkdir(exist_ok=True)
        (server_dir / "tls.crt").write_bytes(server.cert_pem)
        (server_dir / "tls.key").write_bytes(server.key_pem)
        (server_dir / "client-ca.crt").write_bytes(ca.cert_pem)
        app = create_app(parse_script({"turns": []}))
        async with serve_tls(
            app,
            cert=server_dir / "tls.crt",
            key=server_dir / "tls.key",
            client_ca=server_dir / "client-ca.crt",
        ) as address:
            platform = Platform(ca, tmp_path / "service-tls", address, app.state.standin)
            write_tls_dir(platform.tls_dir, leaf=platform.client_leaf(), ca_pem=ca.pem)
            yield platform

    return serve


@pytest.fixture
async def platform(platform_factory: Serve) -> AsyncIterator[Platform]:
    async with platform_factory() as served:
        yield served


@pytest.fixture
async def closing() -> AsyncIterator[list[ModelProvider]]:
    made: list[ModelProvider] = []
    yield made
    for provider in made:
        await provider.aclose()


async def test_an_installation_model_answers_over_mtls(
    platform: Platform, closing: list[ModelProvider]
) -> None:
    platform.script(["Hello from the platform."], {MODEL: COMPLETION_ONLY})
    provider = platform.provider()
    closing.append(provider)

    answer = await provider.complete(HELLO)

    assert answer.content == "Hello from the platform."
    assert platform.received() == ["/api/show", "/v1/chat/completions"]
    assert platform.state.requests[-1]["body"]["model"] == MODEL


async def test_api_show_is_asked_once_per_model(
    platform: Platform, closing: list[ModelProvider]
) -> None:
    platform.script(["One.", "Two.", "Three."], {MODEL: SERVES_TOOLS})
    provider = platform.provider()
    closing.append(provider)

    for _ in range(3):
        await provider.complete(HELLO)

    assert platform.received().count("/api/show") == 1
    assert provider.probes == 1


async def test_a_request_needing_tools_the_model_lacks_is_refused_before_it_is_sent(
    platform: Platform, closing: list[ModelProvider]
) -> None:
    platform.script(["never served"], {MODEL: COMPLETION_ONLY})
    provider = platform.provider()
    closing.append(provider)

    with pytest.raises(Refused) as caught:
        await provider.complete(ModelRequest("", [UserMessage("Look it up.")], [TOOL]))

    assert MODEL in str(caught.value)
    assert "tools" in str(caught.value)
    assert platform.received() == ["/api/show"], "nothing but the question was sent"


async def test_an_effort_the_model_does_not_offer_is_refused_before_it_is_sent(
    platform: Platform, closing: list[ModelProvider]
) -> None:
    thinking = {"capabilities": ["completion", "thinking"], "thinking": ["low", "medium"]}
    platform.script(["Thought about it."], {MODEL: thinking})
    provider = platform.provider()
    closing.append(provider)

    with pytest.raises(Refused) as caught:
        await drain(provider, ModelRequest("", [UserMessage("Hm?")], reasoning_effort="high"))
    answer = await provider.complete(ModelRequest("", [UserMessage("Hm?")], reasoning_effort="low"))

    assert MODEL in str(caught.value)
    assert "'high'" in str(caught.value)
    assert answer.content == "Thought about it."
    assert platform.received() == ["/api/show", "/v1/chat/completions"]


async def test_a_failed_question_is_not_cached(
    platform: Platform, closing: list[ModelProvider]
) -> None:
    platform.script(["Ready now."], {})  # the model is not served yet: /api/show says 404
    provider = platform.provider()
    closing.append(provider)

    with pytest.raises(ModelUnavailable) as caught:
        await provider.complete(HELLO)
    assert "404" in str(caught.value)
    assert platform.received() == ["/api/show"]

    platform.script(["Ready now."], {MODEL: COMPLETION_ONLY})
    answer = await provider.complete(HELLO)

    assert answer.content == "Ready now."
    assert provider.probes == 2, "the failure was asked again, the success is kept"


async def test_a_server_without_the_models_uri_san_is_refused(
    platform_factory: Serve, closing: list[ModelProvider]
) -> None:
    async with platform_factory(uris=("ankka://platform/impostor",)) as platform:
        platform.script(["secret answer"], {MODEL: COMPLETION_ONLY})
        provider = platform.provider()
        closing.append(provider)

        with pytest.raises(ModelUnavailable) as caught:
            await provider.complete(HELLO)

        assert MODELS_URI in str(caught.value)
        assert platform.received() == [], "not a byte of a request reached the impostor"


async def test_a_server_from_another_ca_is_refused(
    platform_factory: Serve, closing: list[ModelProvider]
) -> None:
    async with platform_factory(server_ca=new_ca("some other CA")) as platform:
        platform.script(["secret answer"], {MODEL: COMPLETION_ONLY})
        provider = platform.provider()
        closing.append(provider)

        with pytest.raises(ModelUnavailable) as caught:
            await provider.complete(HELLO)

        assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value)
        assert platform.received() == []


async def test_a_rotated_client_certificate_is_used_without_a_restart(
    platform: Platform, closing: list[ModelProvider]
) -> None:
    platform.script(["before", "after"], {MODEL: COMPLETION_ONLY})
    provider = platform.provider()
    closing.append(provider)
    assert (await provider.complete(HELLO)).content == "before"

    # Rotated to a certificate the server does not trust: the next call must use it, and fail.
    stranger = new_ca("not the platform")
    write_tls_dir(
        platform.tls_dir, leaf=stranger.leaf("service-a", client=True), ca_pem=platform.ca.pem
    )
    with pytest.raises(ModelUnavailable) as caught:
        await provider.complete(HELLO)
    assert "cannot reach the server" in str(caught.value)
    assert str(platform.tls_dir) in str(caught.value), "says where the certificate comes from"

    # Rotated again, to a new certificate from the platform's CA: the same provider answers.
    write_tls_dir(platform.tls_dir, leaf=platform.client_leaf(), ca_pem=platform.ca.pem)
    assert (await provider.complete(HELLO)).content == "after"
    assert platform.received() == ["/api/show", "/v1/chat/completions", "/v1/chat/completions"]


async def test_the_client_refuses_to_start_without_its_tls_files(tmp_path: Path) -> None:
    from ankka._kernel.errors import ConfigurationError

    environ = {
        "ANKKA_MODELS_ADDRESS": "https://gateway.invalid",
        "ANKKA_TLS_DIR": str(tmp_path / "missing"),
        "ANKKA_MODEL_BRAIN_PRESET": "installation",
        "ANKKA_MODEL_BRAIN_MODEL": MODEL,
    }
    with pytest.raises(ConfigurationError, match=r"tls\.crt"):
        providers_from_environment(environ)


async def drain(provider: ModelProvider, request: ModelRequest) -> None:
    async for _ in provider.stream(request):
        pass
