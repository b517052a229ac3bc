"""End to end: the runtime's installation provider reaching a model through the real gateway.

The two sides were built apart: the runtime pins the gateway's URI SAN, asks ``/api/show`` and
refuses what the model cannot do; the gateway requires the service's certificate and answers
``/api/show`` from its own probe. This proves they agree on the wire: certificates, paths and
the Ollama answer's shape. (The gateway never imports the runtime; only this test does.)
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ankka._kernel.errors import Refused
from ankka.runtime.declare.tools import ToolSpec
from ankka.runtime.providers.base import ModelRequest
from ankka.runtime.providers.installation import installation_model
from ankka.runtime.records.messages import UserMessage
from tests.integration.gateway.conftest import StartGateway, StartStandin, standin_model
from tests.support.certs import GATEWAY_URI, client_context, new_ca, write_tls_dir

pytestmark = pytest.mark.integration

SERVICE = "ankka://service/shop/assistant"


async def test_the_runtime_reaches_a_model_through_the_gateway_over_mtls(
    start_standin: StartStandin, start_gateway: StartGateway, tmp_path: Path
) -> None:
    standin = start_standin(
        {
            "turns": [{"text": "Hello through the gateway.", "usage": {"input_tokens": 4}}],
            "models": {"small": {"capabilities": ["completion"]}},
        }
    )
    ca = new_ca()
    write_tls_dir(tmp_path / "gateway", leaf=ca.issue(GATEWAY_URI, server=True), ca_pem=ca.pem)
    service = ca.issue(SERVICE)
    write_tls_dir(tmp_path / "service", leaf=service, ca_pem=ca.pem)
    verify = client_context(ca, service, tmp_path, stem="probe")
    gateway = start_gateway(
        [standin_model(standin.url)], tls_dir=tmp_path / "gateway", verify=verify
    )
    provider = installation_model(
        name="brain",
        model="small",
        base_url=f"{gateway.url}/v1",
        tls_dir=str(tmp_path / "service"),
    )
    try:
        answer = await provider.complete(ModelRequest("", [UserMessage("Hello?")]))
        tool = ToolSpec("lookup", "Look something up", {"type": "object", "properties": {}})
        with pytest.raises(Refused) as refused:
            await provider.complete(ModelRequest("", [UserMessage("Look it up.")], [tool]))
    finally:
        await provider.aclose()

    assert answer.content == "Hello through the gateway."
    assert "tools" in str(refused.value)
    assert len(standin.chats()) == 1  # the refused request reached neither gateway nor model
    async with httpx.AsyncClient(verify=verify) as http:
        metrics = (await http.get(f"{gateway.url}/metrics")).text
    assert 'ankka_gateway_requests_total{caller="shop/assistant",model="small"} 1.0' in metrics
