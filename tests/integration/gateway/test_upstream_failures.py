"""The gateway when upstreams fail, are slow, are busy, change, or lose their caller."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import socket
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.integration.gateway.conftest import (
    Gateway,
    StartGateway,
    StartStandin,
    standin_model,
)
from tests.support.eventually import eventually

pytestmark = pytest.mark.integration

HI: Any = [{"role": "user", "content": "hi"}]
TOOL: Any = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def models(capabilities: list[str]) -> dict[str, Any]:
    return {"small": {"capabilities": capabilities}}


def test_an_upstream_that_went_down_is_503_naming_the_model(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin({"turns": [], "models": models(["completion"])})
    gateway = start_gateway([standin_model(standin.url)])
    standin.server.stop()

    with pytest.raises(openai.InternalServerError) as down:
        openai.OpenAI(
            base_url=gateway.openai_url, api_key="none", max_retries=0
        ).chat.completions.create(
            model="small",
            messages=HI,
        )

    assert down.value.status_code == 503
    assert down.value.code == "upstream_unavailable"
    assert "'small'" in down.value.message
    assert 'kind="unavailable"' in gateway.metrics()


def test_an_upstream_that_does_not_answer_in_time_is_504(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(
        {"turns": [{"text": "late", "delay_ms": 5000}], "models": models(["completion"])}
    )
    gateway = start_gateway([standin_model(standin.url, timeout_s=0.3)])

    answer = httpx.post(
        f"{gateway.openai_url}/chat/completions", json={"model": "small", "messages": HI}
    )

    assert answer.status_code == 504
    assert answer.json()["error"]["code"] == "upstream_timeout"
    assert "'small'" in answer.json()["error"]["message"]


async def test_requests_past_the_queue_get_429_with_retry_after(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    turns = [{"text": f"answer {i}", "delay_ms": 1500} for i in range(6)]
    standin = start_standin({"turns": turns, "models": models(["completion"])})
    gateway = start_gateway([standin_model(standin.url, max_concurrency=1, max_queue=1)])

    async with httpx.AsyncClient(timeout=30) as client:
        answers = await asyncio.gather(
            *(
                client.post(
                    f"{gateway.openai_url}/chat/completions",
                    json={"model": "small", "messages": HI},
                )
                for _ in range(6)
            )
        )

    busy = [a for a in answers if a.status_code == 429]
    served = [a for a in answers if a.status_code == 200]
    assert busy, [a.status_code for a in answers]
    assert len(busy) + len(served) == 6
    assert all(a.headers["retry-after"] == "1" for a in busy)
    assert all(a.json()["error"]["code"] == "model_busy" for a in busy)
    assert len(standin.chats()) == len(served)
    # Never more than one at a time reached the upstream.
    spans = sorted((r["received"], r["answered"]) for r in standin.chats())
    assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))


def connections_to(url: str) -> int:
    """Established TCP connections to ``url``'s port on this machine (from /proc/net)."""
    port = httpx.URL(url).port
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and int(fields[2].rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


IDLE = re.compile(r'ankka_gateway_in_flight\{model="small"\} 0\.0')


def test_a_caller_leaving_mid_stream_cancels_the_upstream_request(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    # A long answer: the stand-in is still writing it when the caller leaves.
    long_text = " ".join(["word"] * 300_000)
    standin = start_standin({"turns": [{"text": long_text}], "models": models(["completion"])})
    gateway = start_gateway([standin_model(standin.url)])

    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST",
            f"{gateway.openai_url}/chat/completions",
            json={"model": "small", "messages": HI, "stream": True},
        ) as response,
    ):
        assert response.status_code == 200
        chunks = response.iter_raw()  # kept: a dropped iterator closes the connection
        assert next(chunks).startswith(b"data: ")
        assert connections_to(standin.url) == 1
    # Leaving the block closed the connection mid-stream.

    eventually(lambda: bool(IDLE.search(gateway.metrics())), what="the stream to be dropped")
    # Cancelled, the upstream connection is closed; a finished one would be kept for reuse.
    eventually(lambda: connections_to(standin.url) == 0, what="the upstream connection to close")
    assert 'ankka_gateway_caller_disconnects_total{caller="anonymous",model="small"} 1.0' in (
        gateway.metrics()
    )


def test_a_caller_leaving_before_the_first_byte_cancels_the_upstream_request(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(
        {"turns": [{"text": "too late", "delay_ms": 30_000}], "models": models(["completion"])}
    )
    gateway = start_gateway([standin_model(standin.url)])

    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{gateway.openai_url}/chat/completions",
            json={"model": "small", "messages": HI, "stream": True},
            timeout=httpx.Timeout(30, read=1.0),
        )

    assert len(standin.chats()) == 1  # it did reach the upstream before the caller left
    eventually(lambda: bool(IDLE.search(gateway.metrics())), what="the request to be dropped")
    eventually(lambda: connections_to(standin.url) == 0, what="the upstream connection to close")


def _chat_request(gateway: Gateway) -> bytes:
    body = json.dumps({"model": "small", "messages": HI}).encode()
    url = httpx.URL(gateway.url)
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % (url.host.encode(), len(body))
    ) + body


@pytest.mark.parametrize("server", ["own", "uvicorn"])
def test_a_caller_half_closing_while_a_whole_answer_is_awaited_cancels_it_and_is_counted(
    start_standin: StartStandin, start_gateway: StartGateway, server: str
) -> None:
    # The gateway's own server tells the request of the disconnect from the connection; under
    # uvicorn a watcher waits on receive(). Either way: cancelled upstream, counted, and the
    # gateway serves the next request as before.
    standin = start_standin(
        {
            "turns": [{"text": "too late", "delay_ms": 30_000}, {"text": "on time"}],
            "models": models(["completion"]),
        }
    )
    args = ["--server", "uvicorn"] if server == "uvicorn" else []
    gateway = start_gateway([standin_model(standin.url)], args=args)
    url = httpx.URL(gateway.url)

    with socket.create_connection((url.host, url.port), timeout=30) as sock:
        sock.sendall(_chat_request(gateway))
        eventually(lambda: len(standin.chats()) == 1, what="the request to reach the upstream")
        sock.shutdown(socket.SHUT_WR)  # the whole request was sent; the caller stops waiting
        assert sock.recv(1) == b""  # the gateway closed its side, answering nothing

    eventually(lambda: bool(IDLE.search(gateway.metrics())), what="the request to be dropped")
    eventually(lambda: connections_to(standin.url) == 0, what="the upstream connection to close")
    assert 'ankka_gateway_caller_disconnects_total{caller="anonymous",model="small"} 1.0' in (
        gateway.metrics()
    )
    answer = httpx.post(
        f"{gateway.openai_url}/chat/completions", json={"model": "small", "messages": HI}
    )
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "on time"


def test_a_changed_models_file_is_served_without_restart(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(
        {
            "turns": [{"text": "from the new model"}],
            "models": {
                "small": {"capabilities": ["completion"]},
                "other": {"capabilities": ["completion"]},
            },
        }
    )
    gateway = start_gateway([standin_model(standin.url)])

    gateway.write_models([standin_model(standin.url), standin_model(standin.url, name="other")])

    def listed() -> list[str]:
        return [m["id"] for m in httpx.get(f"{gateway.openai_url}/models").json()["data"]]

    eventually(lambda: listed() == ["small", "other"], what="the new model to be listed")
    eventually(lambda: httpx.get(f"{gateway.url}/readyz").status_code == 200, what="the new probe")
    answer = httpx.post(
        f"{gateway.openai_url}/chat/completions", json={"model": "other", "messages": HI}
    )
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "from the new model"


def test_a_broken_models_file_keeps_the_models_read_before(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin({"turns": [{"text": "still here"}], "models": models(["completion"])})
    gateway = start_gateway([standin_model(standin.url)])

    gateway.models_file.write_text("models: [{name: broken, kind: nonsense}]\n")
    eventually(
        lambda: any("still serving the models read before" in line for line in gateway.output),
        what="the gateway to report the broken file",
    )

    answer = httpx.post(
        f"{gateway.openai_url}/chat/completions", json={"model": "small", "messages": HI}
    )
    assert answer.status_code == 200
    assert any("'kind' must be one of" in line for line in gateway.output)


def test_capabilities_are_probed_again_and_decisions_follow(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin({"turns": [], "models": models(["completion"])})
    gateway = start_gateway([standin_model(standin.url)], probe_interval_s=0.2)
    body = {"model": "small", "messages": HI, "tools": [TOOL]}
    refused = httpx.post(f"{gateway.openai_url}/chat/completions", json=body)
    assert refused.status_code == 400

    # The server is redeployed with a model that calls tools.
    standin.load({"turns": [{"text": "now with tools"}], "models": models(["completion", "tools"])})

    def show() -> Any:
        return httpx.post(f"{gateway.url}/api/show", json={"model": "small"}).json()

    eventually(lambda: "tools" in show()["capabilities"], what="the re-probe to see tools")
    answer = httpx.post(f"{gateway.openai_url}/chat/completions", json=body)
    assert answer.status_code == 200, answer.text
    assert json.loads(answer.text)["choices"][0]["message"]["content"] == "now with tools"


def test_the_upstreams_own_error_is_passed_on_unchanged(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin({"turns": [], "models": models(["completion"])})
    gateway = start_gateway([standin_model(standin.url)])

    answer = httpx.post(
        f"{gateway.openai_url}/chat/completions", json={"model": "small", "messages": HI}
    )

    # The stand-in answers 418 when its script is exhausted; the gateway does not rewrite it.
    assert answer.status_code == 418
    assert answer.json()["error"]["type"] == "script_exhausted"
    assert len(standin.chats()) == 1
