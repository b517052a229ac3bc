"""``ankka up --model URL``: a model server that runs already, adopted through the gateway.

The server here is the stand-in (a real HTTP server; the model boundary's double). With its
script's ``models`` it answers ``/api/show`` as Ollama does, so it is adopted as an Ollama
server and the gateway probes it there; without them it answers neither ``/api/show`` nor
``/props`` and is adopted as a plain OpenAI-compatible server with declared capabilities.
Either way the answer goes runtime → gateway (mTLS) → that server, and no model part starts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.up.conftest import start_up
from tests.support.processes import REPO, Server

pytestmark = pytest.mark.integration

SCRIPT: dict[str, Any] = json.loads((REPO / "examples" / "up-standin.json").read_text())


def _ask(url: str) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/agents/weather/sessions/s1",
        json={"message": "What is the weather in Helsinki?"},
        timeout=60,
    )


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_up_adopts_a_running_server_and_answers_through_the_gateway(
    up_state: Path, standin: Callable[[Any], Server], kind: str
) -> None:
    script = SCRIPT if kind == "ollama" else {"turns": SCRIPT["turns"]}
    model = standin(script)
    up = start_up(up_state, "--model", f"{model.url}/v1")
    try:
        assert up.process.poll() is None, up.text
        parts = up.record()["parts"]
        assert isinstance(parts, list)
        assert [p["name"] for p in parts] == ["gateway", "runtime"]
        answer = _ask(up.url)
        assert answer.status_code == 200, answer.text
        assert answer.json()["reply"] == "It is -3 °C with light snow in Helsinki: dress warmly."
    finally:
        up.stop()
    said = {"ollama": "Ollama server", "openai": "OpenAI-compatible server"}[kind]
    assert f"the model is the {said} at {model.url} serving standin" in up.text
    models = (up_state / "models.yaml").read_text()
    assert f"kind: {kind}" in models
    seen = httpx.get(f"{model.url}/_standin/requests").json()["requests"]
    paths = [r["path"] for r in seen]
    assert paths.count("/v1/chat/completions") == 2  # the turn's two calls reached the server
    if kind == "ollama":
        assert "/api/show" in paths  # asked by up, and by the gateway's probe


def test_a_server_with_several_models_is_refused_naming_them(
    up_state: Path, standin: Callable[[Any], Server]
) -> None:
    two = {**SCRIPT, "models": {"a": SCRIPT["models"]["standin"], "b": SCRIPT["models"]["standin"]}}
    model = standin(two)
    up = start_up(up_state, "--model", model.url)
    try:
        assert up.wait(30) == 2
    finally:
        up.stop()
    assert "serves 2 models (a, b); pass --model-name with one" in up.text
    chosen = start_up(up_state, "--model", model.url, "--model-name", "b")
    try:
        assert chosen.process.poll() is None, chosen.text
        assert "serving b" in chosen.text
    finally:
        chosen.stop()
