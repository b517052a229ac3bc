"""Judgments of an installation model: the runtime's judgment provider through the real gateway
over mTLS.

The gateway's probe notes whether a model returns logprobs (for llama.cpp it asks the model for
one token with logprobs) and shows it on ``/api/show`` as the capability ``logprobs``; the
runtime's installation judgment provider reads that before sending, so a model without it is
refused with nothing sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from ankka.runtime.judgments import Choice, Inquiry, LogprobsMissing, YesNo, ask
from ankka.runtime.providers.checked import CapabilityCheck
from ankka.runtime.providers.installation import installation_model
from ankka.runtime.providers.judges import judge_for
from tests.integration.gateway.conftest import Gateway, StartGateway, StartStandin, standin_model
from tests.integration.llamacpp import LlamaServer
from tests.support.certs import GATEWAY_URI, client_context, new_ca, write_tls_dir

pytestmark = pytest.mark.integration

SERVICE = "ankka://service/shop/triage"
URGENT = YesNo("urgent", "Is the customer upset about a delay?")
TEAM = Choice("team", "Which team should answer?", ["billing", "shipping", "other", "sales"])
LATE = "My parcel was due a week ago and still has not arrived."


def mtls_gateway(
    start_gateway: StartGateway, tmp_path: Path, models: list[dict[str, Any]]
) -> tuple[Gateway, CapabilityCheck]:
    """The gateway with real TLS, and the runtime's installation provider for model ``name``."""
    ca = new_ca()
    write_tls_dir(tmp_path / "gateway", leaf=ca.issue(GATEWAY_URI, server=True), ca_pem=ca.pem)
    service = ca.issue(SERVICE)
    write_tls_dir(tmp_path / "service", leaf=service, ca_pem=ca.pem)
    verify = client_context(ca, service, tmp_path, stem="probe")
    gateway = start_gateway(models, tls_dir=tmp_path / "gateway", verify=verify)
    provider = installation_model(
        name="default",
        model=models[0]["name"],
        base_url=f"{gateway.url}/v1",
        tls_dir=str(tmp_path / "service"),
    )
    return gateway, provider


async def test_a_judgment_of_the_real_model_through_the_gateway_over_mtls(
    start_gateway: StartGateway, llama_server: LlamaServer, tmp_path: Path
) -> None:
    model = {
        "name": "smollm2",
        "kind": "llamacpp",
        "url": llama_server.base_url,
        "upstream_model": llama_server.model,
    }
    gateway, provider = mtls_gateway(start_gateway, tmp_path, [model])
    judge = judge_for(provider)
    assert judge is not None
    try:
        caps = await provider.capabilities()
        judgment = await ask(judge, Inquiry(LATE, (URGENT, TEAM)), floor=0.0)
    finally:
        await provider.aclose()

    assert "logprobs" in caps.words()  # the gateway's probe noted it
    for answer in judgment.answers.values():
        assert sum(answer.probabilities.values()) == pytest.approx(1.0, abs=1e-6)
        assert 0.0 < answer.coverage <= 1.0
    assert judgment.usage.input_tokens > 0
    assert judgment.provider == "default"
    async with httpx.AsyncClient(verify=gateway.verify) as http:
        metrics = (await http.get(f"{gateway.url}/metrics")).text
    assert 'ankka_gateway_requests_total{caller="shop/triage",model="smollm2"} 2.0' in metrics


async def test_a_model_without_logprobs_is_refused_before_anything_is_sent(
    start_standin: StartStandin, start_gateway: StartGateway, tmp_path: Path
) -> None:
    standin = start_standin(
        {"turns": [{"text": "A"}], "models": {"plain": {"capabilities": ["completion"]}}}
    )
    _, provider = mtls_gateway(start_gateway, tmp_path, [standin_model(standin.url, "plain")])
    judge = judge_for(provider)
    assert judge is not None
    try:
        with pytest.raises(LogprobsMissing) as refused:
            await ask(judge, Inquiry(LATE, (URGENT,)))
    finally:
        await provider.aclose()

    assert "model 'plain' cannot answer judgments" in str(refused.value)
    assert "'logprobs'" in str(refused.value)
    assert "not sent" in str(refused.value)
    assert standin.chats() == []  # the refusal happened in the runtime: nothing went out
