"""The ``llama_server`` fixture: a real llama.cpp server with SmolLM2 on a loopback port.

Why this exists: everything in ankka that talks to a model, except tool calling, is tested
against a real server as well as the stand-in, so wire-shape assumptions meet reality. One
server is started per test session (start-up is about a second, but the model's memory is
better paid once) and stopped at teardown.

A missing server or model FAILS the test with the install command: CI must never pass a tier
by silently skipping it. Register it in a ``conftest.py`` with
``from tests.integration.llamacpp import llama_server``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from ankka.local import local_model

__all__ = ["LlamaServer", "llama_server"]

# Small on purpose: tests send short prompts; a small context loads faster and uses less memory.
TEST_CTX = 2048


@dataclass(frozen=True, slots=True)
class LlamaServer:
    """What a test needs to reach the server."""

    base_url: str  # http://127.0.0.1:<port>, without /v1
    model: str  # the name /v1/models reports, i.e. the GGUF file name
    ctx: int  # the context length the server was started with

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    server: local_model.LocalServer | None = None
    problem = ""
    try:
        server = local_model.start(ctx=TEST_CTX, ready_timeout=120.0)
    except local_model.LocalModelError as exc:
        problem = str(exc)
    if server is None:  # failed outside the except block, so the report is the message alone
        pytest.fail(f"the real local model is not available: {problem}", pytrace=False)
    try:
        yield LlamaServer(base_url=server.base_url, model=server.model_name, ctx=TEST_CTX)
    finally:
        server.stop()
