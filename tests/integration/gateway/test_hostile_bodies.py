"""Bodies a hostile caller sends the gateway: escaped keys and malformed checked values.

Each is decided on its decoded values, answered 400 in OpenAI's error shape (never a 500 in
plain text), counted under ``ankka_gateway_refusals_total`` with its reason, and nothing
reaches the upstream (issue 13, defects 4 and 5).
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest

from tests.integration.gateway.conftest import (
    Gateway,
    Standin,
    StartGateway,
    StartStandin,
    standin_model,
    write_models,
)
from tests.support.eventually import eventually
from tests.support.processes import ankka_command, start

pytestmark = pytest.mark.integration

_SMALL = {"turns": [{"text": "hello"}], "models": {"small": {"capabilities": ["completion"]}}}
_DEEP = 100_000


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Standin, Gateway]]:
    """One stand-in and one gateway (with its health port) for the tests that send only what
    is refused: each reads the upstream's requests and its reason's count before and after
    its own request, so one case's refusal cannot stand in for another's."""
    work = tmp_path_factory.mktemp("hostile")
    with ExitStack() as stack:
        script = work / "standin.json"
        script.write_text(json.dumps(_SMALL))
        model = start(ankka_command("standin", "--script", str(script), "--port", "0"))
        stack.callback(model.stop)
        models = work / "models.yaml"
        write_models(models, [standin_model(model.url)])
        command = ankka_command(
            "gateway", "--models", str(models), "--insecure", "--host", "127.0.0.1",
            "--port", "0", "--health-port", "0",
        )  # fmt: skip
        server = start(command)
        stack.callback(server.stop)
        gateway = Gateway(server.url, server, models, True, server.output)
        eventually(
            lambda: httpx.get(f"{gateway.url}/readyz").status_code == 200,
            what="the gateway to probe its models",
        )
        yield Standin(model.url, model), gateway


def _refusals(gateway: Gateway, reason: str) -> float:
    """The sum of ``ankka_gateway_refusals_total`` over the series with this reason."""
    pattern = re.compile(
        r'^ankka_gateway_refusals_total\{[^}]*reason="' + re.escape(reason) + r'"[^}]*\} (\S+)$',
        re.M,
    )
    return sum(float(value) for value in pattern.findall(gateway.metrics()))


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (
            b'{"model":"small","messages":[{"role":"user","content":'
            b'[{"type":"\\u0069mage_url","\\u0069mage_url":{"url":"data:,"}}]}]}',
            "model_lacks_capability",
        ),
        (
            b'{"model":"small","messages":[],"\\u0074ools":[{"type":"function",'
            b'"function":{"name":"f"}}]}',
            "model_lacks_capability",
        ),
        (b'{"model":"small","messages":[],"reasoning_effort":{}}', "invalid_reasoning_effort"),
        (b'{"model":"small","messages":[],"reasoning_effort":[]}', "invalid_reasoning_effort"),
        (
            b'{"model":"small","messages":[],"reasoning":{"effort":{}}}',
            "invalid_reasoning_effort",
        ),
        (
            b'{"model":"small","messages":[{"role":"user","content":[{"type":{"image_url":1}}]}]}',
            "invalid_content_part",
        ),
        (b'{"model":"small","x":' + b"[" * _DEEP + b"]" * _DEEP + b"}", "invalid_json"),
        (b"[" * _DEEP + b"]" * _DEEP, "invalid_json"),
    ],
)
def test_a_hostile_body_is_a_counted_400_in_openai_shape(
    shared: tuple[Standin, Gateway], body: bytes, code: str
) -> None:
    standin, gateway = shared
    counted, chats = _refusals(gateway, code), len(standin.chats())

    answer = httpx.post(f"{gateway.openai_url}/chat/completions", content=body)

    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == code
    assert error["type"] == "invalid_request_error"
    assert error["message"]
    assert _refusals(gateway, code) == counted + 1
    assert len(standin.chats()) == chats


def test_show_with_deep_nesting_is_a_400(shared: tuple[Standin, Gateway]) -> None:
    _, gateway = shared

    answer = httpx.post(f"{gateway.url}/api/show", content=b"[" * 30_000 + b"]" * 30_000)

    assert answer.status_code == 400


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("TRACE", "/v1/models", "GET"),
        ("GET", "/v1/chat/completions", "POST"),
        ("TRACE", "/healthz", "GET"),
        ("DELETE", "/api/show", "POST"),
    ],
)
def test_a_wrong_method_is_405_naming_the_allowed_one(
    shared: tuple[Standin, Gateway], method: str, path: str, allow: str
) -> None:
    _, gateway = shared
    [line] = [line for line in gateway.output if "health on" in line]
    health = line.split("health on ", 1)[1].strip()

    answer = httpx.request(method, f"{gateway.url}{path}")
    assert answer.status_code == 405
    assert answer.headers["allow"] == allow
    assert answer.json()["error"]["code"] == "method_not_allowed"
    on_health = httpx.request("TRACE", f"{health}/healthz")
    assert (on_health.status_code, on_health.headers["allow"]) == (405, "GET")


def test_a_caller_leaving_mid_body_is_counted_not_traced(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(_SMALL)
    gateway = start_gateway([standin_model(standin.url)])
    url = httpx.URL(gateway.url)
    assert url.host and url.port
    with socket.create_connection((url.host, url.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
        )
    counted = 'ankka_gateway_caller_disconnects_total{caller="anonymous",model="(unknown)"} 1.0'
    eventually(lambda: counted in gateway.metrics(), what="the gateway to see the caller leave")
    output = gateway.server.stop()

    assert "Traceback" not in output


def test_a_whole_answer_past_the_cap_is_a_502_naming_it_and_a_stream_is_not_capped(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    big = "x" * 300_000
    standin = start_standin({"turns": [{"text": big}, {"text": big}], "models": _SMALL["models"]})
    gateway = start_gateway([standin_model(standin.url, max_answer_bytes=100_000)])
    chat = {"model": "small", "messages": [{"role": "user", "content": "hi"}]}

    whole = httpx.post(f"{gateway.openai_url}/chat/completions", json=chat, timeout=30)
    streamed = httpx.post(
        f"{gateway.openai_url}/chat/completions", json={**chat, "stream": True}, timeout=30
    )

    assert whole.status_code == 502
    error = whole.json()["error"]
    assert error["code"] == "upstream_answer_too_large"
    assert "100000 bytes" in error["message"] and "'small'" in error["message"]
    assert streamed.status_code == 200 and big[:1000] in streamed.text.replace('"', "")
    assert 'kind="too_large"' in gateway.metrics()
