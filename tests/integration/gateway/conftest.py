"""Fixtures for the gateway's integration tests: real processes on loopback.

``start_standin(script)`` runs ``ankka standin`` (the upstream; its ``/_standin/requests`` is how
a test proves nothing reached it) and ``start_gateway(models, ...)`` runs ``ankka gateway`` as a
process with a models file, waiting until ``/readyz`` says every model was probed. Both are
stopped when the test ends. ``llama_server`` is the real llama.cpp server (see below).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.integration.conftest import Script
from tests.support.eventually import eventually
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration


@dataclass
class Standin:
    url: str
    server: Server

    def load(self, script: Script) -> None:
        httpx.put(f"{self.url}/_standin/script", json=script).raise_for_status()

    def received(self) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.url}/_standin/requests").json()
        requests: list[dict[str, Any]] = answer["requests"]
        return requests

    def chats(self) -> list[dict[str, Any]]:
        """The chat requests that reached the stand-in (its /api/show probes left out)."""
        return [r for r in self.received() if r["path"] == "/v1/chat/completions"]


@dataclass
class Gateway:
    url: str
    server: Server
    models_file: Path
    verify: ssl.SSLContext | bool = True
    output: list[str] = field(default_factory=list)

    @property
    def openai_url(self) -> str:
        return f"{self.url}/v1"

    def metrics(self, client: httpx.Client | None = None) -> str:
        get = client.get if client is not None else httpx.get
        return get(f"{self.url}/metrics").text

    def write_models(self, models: Sequence[dict[str, Any]], **top: object) -> None:
        write_models(self.models_file, models, **top)


def write_models(path: Path, models: Sequence[dict[str, Any]], **top: object) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump({"models": list(models), **top}))
    tmp.replace(path)


StartStandin = Callable[[Script], Standin]
StartGateway = Callable[..., Gateway]


@pytest.fixture
def start_standin(tmp_path: Path) -> Iterator[StartStandin]:
    with ExitStack() as stack:
        count = [0]

        def _start(script: Script) -> Standin:
            count[0] += 1
            path = tmp_path / f"standin-{count[0]}.json"
            path.write_text(json.dumps(script))
            server = start(ankka_command("standin", "--script", str(path), "--port", "0"))
            stack.callback(server.stop)
            return Standin(server.url, server)

        yield _start


@pytest.fixture
def start_gateway(tmp_path: Path) -> Iterator[StartGateway]:
    with ExitStack() as stack:

        def _start(
            models: Sequence[dict[str, Any]],
            *,
            tls_dir: Path | None = None,
            verify: ssl.SSLContext | bool = True,
            args: Sequence[str] = (),
            ready: bool = True,
            env: Mapping[str, str] | None = None,
            max_files: int | None = None,
            **top: object,
        ) -> Gateway:
            path = tmp_path / "models.yaml"
            write_models(path, models, **top)
            mode = ["--tls-dir", str(tls_dir)] if tls_dir else ["--insecure"]
            command = ankka_command(
                "gateway", "--models", str(path), *mode, "--host", "127.0.0.1", "--port", "0", *args
            )
            server = start(command, env=env, max_files=max_files)
            stack.callback(server.stop)
            gateway = Gateway(server.url, server, path, verify, server.output)
            if ready:
                with httpx.Client(verify=verify) as client:
                    eventually(
                        lambda: client.get(f"{gateway.url}/readyz").status_code == 200,
                        what="the gateway to probe its models",
                    )
            return gateway

        yield _start


def standin_model(url: str, name: str = "small", **extra: Any) -> dict[str, Any]:
    return {"name": name, "kind": "ollama", "url": url, **extra}


# The real llama.cpp server is the tier's shared ``llama_server`` fixture
# (tests/integration/llamacpp.py), registered in tests/integration/conftest.py.
