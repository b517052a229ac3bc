"""The gateway's side of tests/integration/test_connection_admission.py (issue 31, items 6 and
7): never-handshaking sockets from two addresses, past every cap, against a gateway limited to
256 open files, leave a real mTLS chat and the health port served; one caller's streams past
its share are told 429, and a second caller's chat and /healthz are answered.
"""

from __future__ import annotations

import json

import httpx
import pytest

from tests.integration.gateway.conftest import StartGateway, StartStandin, standin_model
from tests.integration.gateway.test_connection_bounds import _address
from tests.integration.gateway.test_mtls import Platform, platform, standin_for
from tests.support.eventually import eventually
from tests.support.hold import (
    SILENT,
    closed_count,
    hold,
    open_files_at_least,
    past_share,
    requests_held,
)

pytestmark = pytest.mark.integration

__all__ = ["platform"]  # the fixture, imported for these tests

_HI = {"model": "small", "messages": [{"role": "user", "content": "hi"}]}


def test_sockets_that_never_start_tls_keep_neither_a_caller_nor_the_health_port_out(
    start_standin: StartStandin, start_gateway: StartGateway, platform: Platform
) -> None:
    standin = standin_for(start_standin, [{"text": "hello"}])
    gateway = start_gateway(
        [standin_model(standin.url)],
        tls_dir=platform.tls_dir,
        verify=platform.client,
        args=["--health-port", "0", "--max-handshakes", "16", "--handshake-timeout", "2"],
        max_files=256,
    )
    [line] = [line for line in gateway.output if "health on" in line]
    health = line.split("health on ", 1)[1].strip()
    host, port = _address(gateway.url)
    open_files_at_least(2048)

    with (
        hold(host, port, 300, send=SILENT, source="127.0.0.2") as crowd,
        hold(host, port, 100, send=SILENT, source="127.0.0.3") as other,
    ):
        with httpx.Client(verify=platform.client, timeout=10) as client:
            chat = client.post(f"{gateway.url}/v1/chat/completions", json=_HI)
        probed = httpx.get(f"{health}/healthz", timeout=10)
        closed = closed_count(crowd + other, 400, within=20)

    assert chat.status_code == 200, chat.text
    assert chat.json()["choices"][0]["message"]["content"] == "hello"
    assert probed.status_code == 200
    assert closed == 400, "past the cap they were closed, the rest at the deadline"
    assert "Too many open files" not in "".join(gateway.output)


def _stream(host: str) -> bytes:
    body = json.dumps({**_HI, "stream": True}).encode()
    return (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def test_one_callers_streams_do_not_keep_another_caller_or_healthz_out(
    start_standin: StartStandin, start_gateway: StartGateway, platform: Platform
) -> None:
    # 16 connections, so a caller's share is 8: alice's first 8 streams wait on a slow model.
    slow = [{"text": "late", "delay_ms": 20_000}] * 8
    standin = standin_for(start_standin, [*slow, {"text": "hi bob"}])
    gateway = start_gateway(
        [standin_model(standin.url)],
        tls_dir=platform.tls_dir,
        verify=platform.client,
        args=["--max-connections", "16"],
    )
    host, port = _address(gateway.url)
    alice = platform.context(platform.ca, platform.ca.issue("ankka://service/team-a/alice"), "a")
    bob = platform.context(platform.ca, platform.ca.issue("ankka://service/team-a/bob"), "b")

    with requests_held(host, port, alice, [_stream(host)] * 16) as streams:
        refused = [s.recv(4096) for s in streams[8:]]  # past her share: answered at once
        eventually(lambda: len(standin.chats()) >= 8, what="alice's 8 streams at the model")
        with httpx.Client(verify=bob, timeout=30) as client:
            chat = client.post(f"{gateway.url}/v1/chat/completions", json=_HI)
            healthz = client.get(f"{gateway.url}/healthz")

    assert all(past_share(answer) for answer in refused), refused[0][:300]
    assert chat.status_code == 200, chat.text
    assert chat.json()["choices"][0]["message"]["content"] == "hi bob"
    assert healthz.status_code == 200
