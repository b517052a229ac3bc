"""A canary key sent to an upstream that quotes it back never reaches a caller, a log, the
metrics or the journal: on every preset, through ``ankka serve`` and through the gateway
(issue 13, defect 3).

The keyed stand-in answers 401 quoting the credential it was sent, as some real servers do.
Two canaries: one shaped like an OpenAI key (hidden by its shape and because it is configured)
and one of no known shape (hidden only because it is configured).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from ankka._kernel.errors import ModelError
from ankka.runtime.providers.base import ModelRequest
from ankka.runtime.providers.registry import providers_from_environment
from ankka.runtime.records.messages import UserMessage
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

STANDIN_KEY = "the-right-key-0123456789"
CANARIES = ("sk-canary-a1b2c3d4e5f6g7h8", "canary-8d2f6c1e9b7a")
HELLO = ModelRequest("", [UserMessage("Hello?")])


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    script = tmp_path_factory.mktemp("canary") / "script.json"
    script.write_text(
        json.dumps({"turns": [], "models": {"m-1": {"capabilities": ["completion"]}}})
    )
    server = start(
        ankka_command("standin", "--script", str(script), "--port", "0", "--api-key-env", "K"),
        env={"K": STANDIN_KEY},
    )
    yield server
    server.stop()


def _settings(preset: str, url: str, key: str) -> dict[str, str]:
    base = url if preset == "anthropic" else f"{url}/v1"
    prefix = "ANKKA_MODEL_BRAIN_"
    values = {"PRESET": preset, "MODEL": "m-1", "URL": base, "API_KEY": key}
    return {prefix + k: v for k, v in values.items()}


@pytest.mark.parametrize("canary", CANARIES)
@pytest.mark.parametrize("preset", ["anthropic", "openai", "openai-compatible", "ollama"])
@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
async def test_no_preset_repeats_an_echoed_key(
    keyed: Server, preset: str, canary: str, streamed: bool
) -> None:
    provider = providers_from_environment(_settings(preset, keyed.url, canary))["brain"]

    async def call() -> None:
        if streamed:
            async for _ in provider.stream(HELLO):
                pass
        else:
            await provider.complete(HELLO)

    try:
        with pytest.raises(ModelError) as caught:
            await call()
    finally:
        await provider.aclose()
    assert caught.value.http_status == 401
    assert "different API key" in str(caught.value), "the upstream's words are still shown"
    assert canary not in str(caught.value)
    assert canary not in repr(caught.value.args)


def test_serve_keeps_an_echoed_key_out_of_answers_logs_metrics_and_journal(
    keyed: Server, tmp_path: Path
) -> None:
    canary = CANARIES[1]
    store = tmp_path / "sessions.sqlite3"
    env = _settings("openai-compatible", keyed.url, canary)
    env = {k.replace("_BRAIN_", "_DEFAULT_"): v for k, v in env.items()}
    server = start(
        ankka_command(
            "serve",
            "tests.integration.services:service",
            "--port",
            "0",
            "--store",
            f"sqlite:///{store}",
            "--access-log",
        ),
        env=env,
    )
    try:
        failed = httpx.post(
            f"{server.url}/v1/agents/polite/sessions/s", json={"message": "hi"}, timeout=30
        )
        streamed = httpx.post(
            f"{server.url}/v1/agents/streamer/sessions/s2", json={"message": "hi"}, timeout=30
        )
        metrics = httpx.get(f"{server.url}/metrics").text
    finally:
        output = server.stop()
    assert failed.status_code == 502
    assert "different API key" in failed.text
    for seen in (failed.text, streamed.text, metrics, output):
        assert canary not in seen
    journal = b"".join(p.read_bytes() for p in tmp_path.glob("sessions.sqlite3*"))
    assert canary.encode() not in journal


def test_the_gateway_keeps_an_echoed_key_out_of_its_answer_and_logs(
    keyed: Server, tmp_path: Path
) -> None:
    canary = CANARIES[1]
    models = tmp_path / "models.yaml"
    entry = {"name": "m-1", "kind": "ollama", "url": keyed.url, "api_key_env": "UPSTREAM_KEY"}
    models.write_text(yaml.safe_dump({"models": [entry]}))
    gateway = start(
        ankka_command(
            "gateway", "--models", str(models), "--insecure", "--host", "127.0.0.1", "--port", "0"
        ),
        env={"UPSTREAM_KEY": canary},
    )
    try:
        for _ in range(200):
            if httpx.get(f"{gateway.url}/readyz").status_code == 200:
                break
        refused = httpx.post(
            f"{gateway.url}/v1/chat/completions",
            json={"model": "m-1", "messages": [{"role": "user", "content": "hi"}]},
        )
        metrics = httpx.get(f"{gateway.url}/metrics").text
    finally:
        output = gateway.stop()
    assert refused.status_code == 401
    assert "different API key" in refused.json()["error"]["message"]
    for seen in (refused.text, metrics, output):
        assert canary not in seen
