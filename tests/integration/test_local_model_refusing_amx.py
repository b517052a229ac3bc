"""The real local model starts, and answers, on a machine that refuses llama.cpp's AMX path.

The machines these tests run on have no AMX, so the refusal is simulated: a wrapper in front
of the real llama-server (tests/support/fake_llama.py) kills it with SIGILL right after
"llama threadpool init" unless it is given ``--no-repack``, as the real one dies on a
Sapphire Rapids-family Xeon under a kernel that does not grant AMX tile state. What answers
is the real server with SmolLM2; the cache is this test's own, so the remembered choice
starts empty and does not touch the shared one.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ankka.local import local_model
from tests.support.fake_llama import calls, refusing_wrapper

pytestmark = pytest.mark.integration


@pytest.fixture
def private_cache(tmp_path: Path) -> Path:
    """A cache with the shared cache's model in it, and nothing remembered yet."""
    try:
        model = local_model.find_model()
    except local_model.LocalModelError as exc:
        pytest.fail(f"the real local model is not available: {exc}", pytrace=False)
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    (cache / "models" / model.name).symlink_to(model)
    return cache


def _answer(server: local_model.LocalServer) -> str:
    answer = httpx.post(
        f"{server.base_url}/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 8,
            "temperature": 0.0,
        },
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    content: str = answer.json()["choices"][0]["message"]["content"]
    return content


def test_the_real_server_falls_back_to_no_repack_answers_and_is_remembered(
    tmp_path: Path, private_cache: Path
) -> None:
    calls_file = tmp_path / "calls.txt"
    wrapper = refusing_wrapper(
        tmp_path / "llama-server", local_model.find_server_binary(), calls_file
    )
    said: list[str] = []
    with local_model.start(
        cache=private_cache, program=wrapper, ctx=2048, ready_timeout=120.0, say=said.append
    ) as server:
        assert server.started.startswith(
            "with --no-repack: as built it died of illegal instruction (SIGILL) before it "
            "was ready; remembered for this machine in "
        )
        assert said and "illegal instruction (SIGILL)" in said[0]
        assert _answer(server).strip()
    with local_model.start(
        cache=private_cache, program=wrapper, ctx=2048, ready_timeout=120.0
    ) as again:
        assert again.started.startswith("with --no-repack, as remembered for this machine")
        assert _answer(again).strip()
    # The second start went straight to the way that works: no second crash.
    assert ["--no-repack" in args for args in calls(calls_file)] == [False, True, True]


def test_the_real_server_without_the_simulation_starts_and_answers(
    private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(local_model.PROGRAM_VARIABLE, raising=False)
    with local_model.start(cache=private_cache, ctx=2048, ready_timeout=120.0) as server:
        assert _answer(server).strip()
    if server.started == "as built":  # a machine that grants what the build uses (here)
        assert not (private_cache / "llama-server").exists()  # nothing to remember
    else:  # a machine that really refuses AMX: the fallback, named by its signal
        assert server.started.startswith("with --no-repack: as built it died of ")
