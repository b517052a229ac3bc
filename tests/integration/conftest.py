"""Integration-tier fixtures: the stand-in and ``ankka serve`` as real processes on loopback."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.llamacpp import llama_server, refused_amx
from tests.support.jaeger import Jaeger, jaeger
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

__all__ = ["Script", "llama_server", "model_env", "received", "refused_amx"]

Script = list[Any] | dict[str, Any]


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[Callable[[Script], Server]]:
    """Start a stand-in serving ``script``; stopped after the test."""
    servers: list[Server] = []

    def make(script: Script) -> Server:
        path = tmp_path / f"script-{len(servers)}.json"
        path.write_text(json.dumps(script))
        server = start(ankka_command("standin", "--script", str(path), "--port", "0"))
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """Servers a test starts (``ankka serve`` processes, ...): each stopped after it."""
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def jaeger_backend() -> Iterator[Jaeger]:
    """Jaeger (OTLP in, query API out) for this session; fails naming its build when missing."""
    with jaeger() as backend:
        yield backend


def model_env(standin_url: str) -> dict[str, str]:
    return {
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": f"{standin_url}/v1",
        "ANKKA_MODEL_DEFAULT_MODEL": "standin",
    }


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start ``ankka serve`` on the test service against a stand-in URL."""
    servers: list[Server] = []

    def make(
        standin_url: str,
        *,
        store: str | None = None,
        target: str = "tests.integration.services:service",
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> Server:
        store = store or f"sqlite:///{tmp_path / 'sessions.sqlite3'}"
        server = start(
            ankka_command("serve", target, "--port", "0", "--store", store, *args),
            env={**model_env(standin_url), **(env or {})},
        )
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def received(standin_server: Server) -> list[dict[str, Any]]:
    """What the stand-in received, in arrival order."""
    answer = httpx.get(f"{standin_server.url}/_standin/requests").json()
    requests: list[dict[str, Any]] = answer["requests"]
    return requests
