"""The gateway's mutual TLS with real certificates: who may connect, who is calling, rotation.

Certificates are made in the test (:mod:`tests.support.certs`). A refused client is refused at
the handshake: its connection is closed (or alerted) without any HTTP answer, and the request
never reaches the app. (Python's asyncio TLS closes without flushing the alert, so the client
mostly sees the connection end rather than a named alert.)
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from cryptography import x509

from tests.integration.gateway.conftest import (
    Standin,
    StartGateway,
    StartStandin,
    standin_model,
)
from tests.support.certs import CA, GATEWAY_URI, Issued, client_context, new_ca, write_tls_dir
from tests.support.eventually import eventually

pytestmark = pytest.mark.integration

HI: Any = [{"role": "user", "content": "hi"}]
CALLER = "ankka://service/team-a/helper"


@dataclass
class Platform:
    ca: CA
    server: Issued
    tls_dir: Path
    client: ssl.SSLContext  # trusts the CA, presents a certificate it issued for CALLER
    work: Path

    def context(self, trust: CA, cert: Issued | None, stem: str) -> ssl.SSLContext:
        return client_context(trust, cert, self.work, stem=stem)


@pytest.fixture
def platform(tmp_path: Path) -> Platform:
    ca = new_ca()
    server = ca.issue(GATEWAY_URI, server=True)
    tls_dir = tmp_path / "tls"
    write_tls_dir(tls_dir, leaf=server, ca_pem=ca.pem)
    client = client_context(ca, ca.issue(CALLER), tmp_path, stem="caller")
    return Platform(ca, server, tls_dir, client, tmp_path)


def start_tls_gateway(
    start_gateway: StartGateway, standin: Standin, platform: Platform
) -> tuple[str, Any]:
    gateway = start_gateway(
        [standin_model(standin.url)],
        tls_dir=platform.tls_dir,
        verify=platform.client,
        args=["--tls-reload-interval", "0.1"],
    )
    return gateway.url, gateway


def connect(url: str, context: ssl.SSLContext) -> str:
    """Handshake, send GET /healthz, read: "answered", or "refused" and what the client saw."""
    address = httpx.URL(url)
    assert address.port is not None
    with socket.create_connection((address.host, address.port), timeout=10) as raw:
        try:
            with context.wrap_socket(raw, server_hostname=address.host) as tls:
                tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n")
                answer = tls.recv(1024)
        except (ssl.SSLError, ConnectionResetError) as exc:
            return f"refused: {exc}"
    if answer.startswith(b"HTTP/1.1 200"):
        return "answered"
    return f"refused: the connection closed with {answer!r}"


def served_certificate(url: str, context: ssl.SSLContext) -> x509.Certificate:
    address = httpx.URL(url)
    assert address.port is not None
    with (
        socket.create_connection((address.host, address.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=address.host) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def standin_for(start_standin: StartStandin, turns: list[dict[str, Any]]) -> Standin:
    return start_standin({"turns": turns, "models": {"small": {"capabilities": ["completion"]}}})


def test_a_platform_caller_is_served_and_counted_by_its_identity(
    start_standin: StartStandin, start_gateway: StartGateway, platform: Platform
) -> None:
    standin = standin_for(
        start_standin, [{"text": "hello", "usage": {"input_tokens": 9, "output_tokens": 1}}]
    )
    url, _ = start_tls_gateway(start_gateway, standin, platform)

    with openai.DefaultHttpxClient(verify=platform.client) as http:
        caller = openai.OpenAI(base_url=f"{url}/v1", api_key="none", http_client=http)
        answer = caller.chat.completions.create(model="small", messages=HI)
    with httpx.Client(verify=platform.client) as http:
        metrics = http.get(f"{url}/metrics").text

    assert answer.choices[0].message.content == "hello"
    assert 'ankka_gateway_requests_total{caller="team-a/helper",model="small"} 1.0' in metrics
    assert 'ankka_gateway_prompt_tokens_total{caller="team-a/helper",model="small"} 9.0' in metrics


def test_the_gateway_presents_the_platform_models_identity(
    start_standin: StartStandin, start_gateway: StartGateway, platform: Platform
) -> None:
    standin = standin_for(start_standin, [])
    url, _ = start_tls_gateway(start_gateway, standin, platform)

    cert = served_certificate(url, platform.client)

    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert GATEWAY_URI in names.get_values_for_type(x509.UniformResourceIdentifier)


@pytest.mark.parametrize("who", ["no certificate", "another CA", "expired"])
def test_a_client_outside_the_platform_is_refused_at_the_handshake(
    start_standin: StartStandin, start_gateway: StartGateway, platform: Platform, who: str
) -> None:
    standin = standin_for(start_standin, [{"text": "must not be served"}])
    url, _ = start_tls_gateway(start_gateway, standin, platform)
    if who == "no certificate":
        context = platform.context(platform.ca, None, "nobody")
    elif who == "another CA":
        context = platform.context(platform.ca, new_ca("elsewhere").issue(CALLER), "stranger")
    else:
        context = platform.context(platform.ca, platform.ca.issue(CALLER, expired=True), "old")

    assert connect(url, platform.client) == "answered"  # the same request, from the platform
    assert connect(url, context).startswith("refused")
    with openai.DefaultHttpxClient(verify=context) as http:
        caller = openai.OpenAI(
            base_url=f"{url}/v1", api_key="none", http_client=http, max_retries=0
        )
        with pytest.raises(openai.APIConnectionError):
            caller.chat.completions.create(model="small", messages=HI)
    assert standin.chats() == []


async def test_rotating_certificates_under_200_requests_in_flight_loses_none(
    start_standin: StartStandin, start_gateway: StartGateway, platform: Platform
) -> None:
    in_flight = 200
    turns = [{"text": f"answer {i}", "delay_ms": 8000} for i in range(in_flight)]
    standin = standin_for(start_standin, turns)
    url, _ = start_tls_gateway(start_gateway, standin, platform)
    # The official client's own transport; its pool allows 1,000 connections.
    async with openai.DefaultAsyncHttpxClient(verify=platform.client, timeout=60) as http:
        caller = openai.AsyncOpenAI(
            base_url=f"{url}/v1", api_key="none", http_client=http, max_retries=0
        )
        calls = [
            asyncio.ensure_future(caller.chat.completions.create(model="small", messages=HI))
            for _ in range(in_flight)
        ]
        try:
            # Every request has reached the stand-in (which holds each for 8 s): all in flight.
            await asyncio.to_thread(
                eventually,
                lambda: len(standin.chats()) == in_flight,
                what=f"all {in_flight} requests to reach the stand-in",
            )

            # Rotate everything: a new CA, a new server certificate, new callers.
            new = new_ca("ankka platform CA, rotated")
            write_tls_dir(
                platform.tls_dir, leaf=new.issue(GATEWAY_URI, server=True), ca_pem=new.pem
            )
            rotated = platform.context(new, new.issue(CALLER), "rotated")
            await asyncio.to_thread(
                eventually,
                lambda: connect(url, rotated) == "answered",
                what="the gateway to serve the rotated certificates",
            )
            finished_before_rotation = sum(call.done() for call in calls)
            answers = await asyncio.gather(*calls)
        finally:
            for call in calls:
                call.cancel()

    assert finished_before_rotation < in_flight, "the rotation did not happen mid-flight"
    texts = sorted(str(a.choices[0].message.content) for a in answers)
    assert texts == sorted(f"answer {i}" for i in range(in_flight))
    # The old CA is no longer trusted for new connections; the new one is.
    stale = platform.context(new, platform.ca.issue(CALLER), "stale")
    assert connect(url, stale).startswith("refused")
    assert connect(url, platform.client).startswith("refused")  # it trusts the old CA only


def test_probes_and_scrapes_without_a_certificate_use_the_health_port_only(
    start_standin: StartStandin, start_gateway: StartGateway, platform: Platform
) -> None:
    standin = standin_for(start_standin, [{"text": "must not be served"}])
    gateway = start_gateway(
        [standin_model(standin.url)],
        tls_dir=platform.tls_dir,
        verify=platform.client,
        args=["--health-port", "0"],
    )
    [line] = [line for line in gateway.output if "health on" in line]
    health = line.split("health on ", 1)[1].strip()

    assert httpx.get(f"{health}/readyz").json()["ready"] is True
    assert httpx.get(f"{health}/healthz").status_code == 200
    assert "ankka_gateway_in_flight" in httpx.get(f"{health}/metrics").text
    assert httpx.get(f"{health}/v1/models").status_code == 404
    chat = httpx.post(f"{health}/v1/chat/completions", json={"model": "small", "messages": HI})
    assert chat.status_code == 405
    assert standin.chats() == []
