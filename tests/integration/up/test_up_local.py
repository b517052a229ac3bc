"""``ankka up --model local``: a real answer from llama.cpp serving SmolLM2, through the gateway.

SmolLM2 cannot call tools, so the agent is the long chat's (no tools); the gateway reads the
model's capabilities from llama.cpp's ``/props``. A missing llama.cpp or model fails (the
model part's log says which), never skips.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ankka.local import local_model
from ankka.local.local_model import MODEL_FILE
from examples.long_chat import MAX_REPLY_TOKENS
from tests.integration.up.conftest import mtls, start_up
from tests.support.fake_llama import refusing_wrapper

pytestmark = pytest.mark.integration


def test_a_real_model_answers_through_the_gateway(up_state: Path) -> None:
    up = start_up(up_state, "examples.long_chat:service", "--model", "local", deadline=240)
    try:
        assert up.process.poll() is None, up.text
        answer = httpx.post(
            f"{up.url}/v1/agents/chat/sessions/real",
            json={"message": "Say hello in one short sentence."},
            timeout=180,
        )
        assert answer.status_code == 200, answer.text
        assert isinstance(answer.json()["reply"], str)
        assert answer.json()["reply"].strip()
        calls = answer.json()["model_calls"]
        assert [c["model"] for c in calls] == [MODEL_FILE]  # the name llama.cpp answers with
        # The example bounds a reply, so a rambling small model cannot run into the timeout.
        assert 0 < calls[0]["usage"]["output_tokens"] <= MAX_REPLY_TOKENS
        with httpx.Client(verify=mtls(up_state)) as client:
            metrics = client.get(f"https://localhost:{up.gateway_port}/metrics").text
        assert 'ankka_gateway_requests_total{caller="local/long-chat",model="smollm2"}' in metrics
    finally:
        up.stop()


def test_on_a_machine_that_refuses_amx_up_says_the_model_started_with_no_repack(
    up_state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Simulated (this machine has no AMX): the real server behind a wrapper that kills it
    # with SIGILL unless given --no-repack (tests/support/fake_llama.py). A cache of the
    # test's own, so nothing is remembered from before and nothing is left in the shared one.
    try:
        real, model = local_model.find_server_binary(), local_model.find_model()
    except local_model.LocalModelError as exc:
        pytest.fail(f"the real local model is not available: {exc}", pytrace=False)
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    (cache / "models" / model.name).symlink_to(model)
    wrapper = refusing_wrapper(tmp_path / "llama-server", real, tmp_path / "calls.txt")
    monkeypatch.setenv(local_model.PROGRAM_VARIABLE, str(wrapper))
    monkeypatch.setenv("ANKKA_CACHE", str(cache))
    up = start_up(up_state, "examples.long_chat:service", "--model", "local", deadline=240)
    try:
        assert up.process.poll() is None, up.text
        assert (
            "ankka up: model: llama-server started with --no-repack: as built it died of "
            "illegal instruction (SIGILL) before it was ready; remembered for this machine"
        ) in up.text
    finally:
        up.stop()
