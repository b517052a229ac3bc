"""Bodies a hostile caller sends the gateway: escaped keys and malformed checked values.

Each is decided on its decoded values, answered 400 in OpenAI's error shape (never a 500 in
plain text), counted under ``ankka_gateway_refusals_total`` with its reason, and nothing
reaches the upstream (issue 13, defects 4 and 5).
"""

from __future__ import annotations

import httpx
import pytest

from tests.integration.gateway.conftest import StartGateway, StartStandin, standin_model

pytestmark = pytest.mark.integration

_SMALL = {"turns": [{"text": "hello"}], "models": {"small": {"capabilities": ["completion"]}}}
_DEEP = 100_000


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
    start_standin: StartStandin, start_gateway: StartGateway, body: bytes, code: str
) -> None:
    standin = start_standin(_SMALL)
    gateway = start_gateway([standin_model(standin.url)])

    answer = httpx.post(f"{gateway.openai_url}/chat/completions", content=body)

    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == code
    assert error["type"] == "invalid_request_error"
    assert error["message"]
    assert f'reason="{code}"' in gateway.metrics()
    assert standin.chats() == []


def test_show_with_deep_nesting_is_a_400(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(_SMALL)
    gateway = start_gateway([standin_model(standin.url)])

    answer = httpx.post(f"{gateway.url}/api/show", content=b"[" * 30_000 + b"]" * 30_000)

    assert answer.status_code == 400
