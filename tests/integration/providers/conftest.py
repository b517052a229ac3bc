"""Fixtures for the provider tests: the stand-in as a real process, providers built from the
environment as a service builds them, and the rule that live tests run only with their key.

A ``live`` test names the variables it needs (``@pytest.mark.live("OPENAI_API_KEY")``); when
one is unset the test is deselected, not skipped, so a run without keys reports nothing
that looks like a gap and a run with them runs the tests.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.providers.registry import providers_from_environment
from tests.support.processes import Server, ankka_command, start

WIRES = ("anthropic", "openai", "openai-compatible")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker("live")
        needed = marker.args if marker is not None else ()
        if marker is not None and (not needed or not all(os.environ.get(v) for v in needed)):
            dropped.append(item)
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


class Standin:
    """A stand-in process and the calls a test makes to it."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.url = server.url

    def script(self, turns: list[Any], models: dict[str, Any] | None = None) -> None:
        body = {"turns": turns, "models": models or {}}
        response = httpx.put(f"{self.url}/_standin/script", content=json.dumps(body))
        response.raise_for_status()

    def requests(self) -> list[dict[str, Any]]:
        received: list[dict[str, Any]] = httpx.get(f"{self.url}/_standin/requests").json()[
            "requests"
        ]
        return received

    def base_url(self, wire: str) -> str:
        # Anthropic's SDK adds /v1 itself; OpenAI's base URL ends in /v1.
        return self.url if wire == "anthropic" else f"{self.url}/v1"


def _start(tmp: Path, *extra: str, env: dict[str, str] | None = None) -> Server:
    script = tmp / "script.json"
    script.write_text("[]")
    return start(ankka_command("standin", "--script", str(script), "--port", "0", *extra), env=env)


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standin]:
    server = _start(tmp_path_factory.mktemp("standin"))
    try:
        yield Standin(server)
    finally:
        server.stop()


STANDIN_KEY = "sk-standin-secret-0123456789"


@pytest.fixture(scope="module")
def keyed_standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standin]:
    """A stand-in that answers 401 unless sent :data:`STANDIN_KEY`."""
    server = _start(
        tmp_path_factory.mktemp("keyed"),
        "--api-key-env",
        "STANDIN_KEY",
        env={"STANDIN_KEY": STANDIN_KEY},
    )
    try:
        yield Standin(server)
    finally:
        server.stop()


Build = Callable[..., ModelProvider]


@pytest.fixture
async def build() -> AsyncIterator[Build]:
    """Build a provider from ``ANKKA_MODEL_*`` variables, as a service does; closed after."""
    made: list[ModelProvider] = []

    def make(name: str, **settings: str) -> ModelProvider:
        prefix = f"ANKKA_MODEL_{name.upper()}_"
        environ = {prefix + k.upper(): v for k, v in settings.items()}
        provider = providers_from_environment(environ)[name]
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.aclose()


def settings_for(wire: str, standin: Standin, **more: str) -> dict[str, str]:
    """Settings for a ``wire`` model at ``standin`` (the hosted presets need some key)."""
    key = {} if wire == "openai-compatible" else {"api_key": "k-test"}
    return {"preset": wire, "model": "m-1", "url": standin.base_url(wire), **key, **more}
