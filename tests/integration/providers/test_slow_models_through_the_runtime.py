"""A slow model through ``ankka serve``: the model timeout decides, nothing shorter in front.

The runtime's HTTP API, the provider and its SDK each have a timeout of their own; a model
that answers after longer than httpx's 5 s default, within the model's ``_TIMEOUT``, must be
answered, and one slower than its ``_TIMEOUT`` must be a 504 naming the configured provider
and the setting, not a transport error from a layer the service never configured.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.providers.conftest import Standin
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration


@pytest.fixture
def runtime(standin: Standin, tmp_path: Path) -> Iterator[Callable[[str], Server]]:
    """``ankka serve`` with its default model on the stand-in, given the model's timeout."""
    servers: list[Server] = []

    def make(timeout: str) -> Server:
        env = {
            "ANKKA_MODEL_DEFAULT_PRESET": "anthropic",
            "ANKKA_MODEL_DEFAULT_URL": standin.url,
            "ANKKA_MODEL_DEFAULT_MODEL": "claude-standin",
            "ANKKA_MODEL_DEFAULT_API_KEY": "k-test",
            "ANKKA_MODEL_DEFAULT_TIMEOUT": timeout,
        }
        store = f"sqlite:///{tmp_path / f'sessions-{len(servers)}.sqlite3'}"
        target = "tests.integration.services:service"
        command = ankka_command("serve", target, "--port", "0", "--store", store)
        servers.append(start(command, env=env))
        return servers[-1]

    yield make
    for server in servers:
        server.stop()


def ask(server: Server, message: str) -> httpx.Response:
    url = f"{server.url}/v1/agents/polite/sessions/s"
    return httpx.post(url, json={"message": message}, timeout=60)


def test_a_model_slower_than_httpxs_default_but_within_its_timeout_is_answered(
    standin: Standin, runtime: Callable[[str], Server]
) -> None:
    standin.script([{"text": "Slow but sure.", "delay_ms": 5500}])

    answer = ask(runtime("20"), "Take your time.")

    assert answer.status_code == 200, answer.text
    assert answer.json()["reply"] == "Slow but sure."


def test_a_model_slower_than_its_timeout_is_a_504_naming_the_setting(
    standin: Standin, runtime: Callable[[str], Server]
) -> None:
    standin.script([{"text": "Too late.", "delay_ms": 6000}] * 3)

    answer = ask(runtime("2.5"), "Hurry.")

    assert answer.status_code == 504, answer.text
    error = answer.json()["error"]
    assert error["type"] == "model_timeout"
    assert "model provider 'default'" in error["message"]
    assert "model timeout of 2.5s" in error["message"]
    assert "nthropic" not in error["message"]
