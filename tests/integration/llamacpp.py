"""The ``llama_server`` fixture: a real llama.cpp server with SmolLM2 on a loopback port.

Why this exists: everything in ankka that talks to a model, except tool calling, is tested
against a real server as well as the stand-in, so wire-shape assumptions meet reality. One
server is started per test session (start-up is about a second, but the model's memory is
better paid once) and stopped at teardown.

A missing server or model FAILS the test with the install command: CI must never pass a tier
by silently skipping it. Register it in a ``conftest.py`` with
``from tests.integration.llamacpp import llama_server``.

With ``ANKKA_TEST_REFUSE_AMX=1`` every real-model start in the tier (this fixture's, and
``ankka up --model local``'s, through ``$ANKKA_LLAMA_SERVER``) goes through a wrapper that
kills the real server with SIGILL unless it is given ``--no-repack``: how llama.cpp's AMX
repack path behaves where the CPU reports AMX and the kernel refuses it, simulated because
the machines here have no AMX (docs/local-model.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ankka.local import local_model
from tests.support.fake_llama import refusing_wrapper

__all__ = ["REFUSE_AMX", "LlamaServer", "llama_server", "refuse_amx_if_asked"]

REFUSE_AMX = "ANKKA_TEST_REFUSE_AMX"

# Small on purpose: tests send short prompts; a small context loads faster and uses less memory.
TEST_CTX = 2048


@dataclass(frozen=True, slots=True)
class LlamaServer:
    """What a test needs to reach the server."""

    base_url: str  # http://127.0.0.1:<port>, without /v1
    model: str  # the name /v1/models reports, i.e. the GGUF file name
    ctx: int  # the context length the server was started with
    started: str = "as built"  # how: as built, or with --no-repack and why

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"


def refuse_amx_if_asked(folder: Path) -> Path | None:
    """With ``ANKKA_TEST_REFUSE_AMX=1``: write the AMX-refusing wrapper in front of the real
    server into ``folder``, point ``$ANKKA_LLAMA_SERVER`` at it (for this process and the
    ``ankka`` processes tests start) and return it; otherwise None."""
    if os.environ.get(REFUSE_AMX) != "1":
        return None
    real = local_model.find_server_binary()
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = refusing_wrapper(folder / "amx-refusing-llama-server", real, folder / "calls.txt")
    os.environ[local_model.PROGRAM_VARIABLE] = str(wrapper)
    return wrapper


@pytest.fixture(scope="session", autouse=True)
def refused_amx() -> Iterator[Path | None]:
    """The simulation of an AMX-refusing machine, when asked for (see the module's doc). The
    wrapper lives in the cache, unchanged from run to run, so what a start remembers about it
    is one record, not one per run (and never the real server's)."""
    before = os.environ.get(local_model.PROGRAM_VARIABLE)
    try:
        yield refuse_amx_if_asked(local_model.cache_dir() / "test-refuse-amx")
    except local_model.LocalModelError as exc:
        pytest.fail(f"the real local model is not available: {exc}", pytrace=False)
    finally:
        if before is None:
            os.environ.pop(local_model.PROGRAM_VARIABLE, None)
        else:
            os.environ[local_model.PROGRAM_VARIABLE] = before


@pytest.fixture(scope="session")
def llama_server(refused_amx: Path | None) -> Iterator[LlamaServer]:
    server: local_model.LocalServer | None = None
    problem = ""
    try:
        server = local_model.start(ctx=TEST_CTX, ready_timeout=120.0)
    except local_model.LocalModelError as exc:
        problem = str(exc)
    if server is None:  # failed outside the except block, so the report is the message alone
        pytest.fail(f"the real local model is not available: {problem}", pytrace=False)
    if refused_amx is not None:  # the simulation must have made it fall back, or it proves nothing
        assert "--no-repack" in server.started, server.started
    try:
        yield LlamaServer(
            base_url=server.base_url, model=server.model_name, ctx=TEST_CTX, started=server.started
        )
    finally:
        server.stop()
