"""The gateway bounds its connections on the TLS port and on the plain health port: idle
sockets past the cap cannot keep a real caller out, and a connection that sends nothing or
stops mid-request is closed (issue 13, defect 2)."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.gateway.conftest import StartGateway, StartStandin, standin_model
from tests.integration.gateway.test_mtls import Platform, platform, standin_for
from tests.support.hold import MID_HEAD, SILENT, closed_count, hold, read_until_closed

pytestmark = pytest.mark.integration

__all__ = ["platform"]  # the fixture, imported for these tests

_CHAT = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b'Content-Length: 200\r\n\r\n{"model": "small", '
)


def _address(url: str) -> tuple[str, int]:
    parsed = httpx.URL(url)
    assert parsed.host and parsed.port
    return parsed.host, parsed.port


def test_the_tls_port_closes_idle_and_stalled_requests_and_serves_a_real_caller(
    start_standin: StartStandin, start_gateway: StartGateway, platform: Platform
) -> None:
    standin = standin_for(start_standin, [{"text": "hello"}])
    gateway = start_gateway(
        [standin_model(standin.url)],
        tls_dir=platform.tls_dir,
        verify=platform.client,
        args=["--max-connections", "6", "--header-timeout", "2", "--body-timeout", "2"],
    )
    host, port = _address(gateway.url)
    tls = platform.client

    with (
        hold(host, port, 20, send=SILENT, tls=tls) as silent,
        hold(host, port, 1, send=MID_HEAD, tls=tls) as [mid_head],
    ):
        with httpx.Client(verify=tls) as client:
            assert client.get(f"{gateway.url}/healthz").status_code == 200
        assert closed_count(silent, 20 + 1 - 6) >= 20 + 1 - 6
        assert read_until_closed(mid_head).startswith(b"HTTP/1.1 408")
    with hold(host, port, 1, send=_CHAT, tls=tls) as [mid_body]:
        read_until_closed(mid_body)  # returns only because the gateway closed it
    assert standin.chats() == []


def test_the_health_port_closes_silent_sockets_and_serves_a_real_probe(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin({"turns": [], "models": {"small": {"capabilities": ["completion"]}}})
    gateway = start_gateway(
        [standin_model(standin.url)],
        args=["--health-port", "0", "--max-connections", "6", "--header-timeout", "2"],
    )
    [line] = [line for line in gateway.output if "health on" in line]
    health = line.split("health on ", 1)[1].strip()
    host, port = _address(health)

    with hold(host, port, 20, send=SILENT) as silent:
        assert httpx.get(f"{health}/healthz", timeout=10).status_code == 200
        assert closed_count(silent, 20 + 1 - 6) >= 20 + 1 - 6
        assert read_until_closed(silent[-1]) == b"", "the header timeout ends the rest"
