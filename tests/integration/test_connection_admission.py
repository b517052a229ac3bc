"""``ankka serve --tls-dir`` counts connections from accept and shares its slots fairly
(issue 31, items 6 and 7), over real processes and real mTLS on loopback:

- sockets that connect and never start TLS, past every cap and from one address, neither use
  up the server's file descriptors (it runs with a limit of 512) nor keep a real mTLS caller
  or kubelet's probe port out; the handshake deadline closes them;
- one caller holding more long-lived streams than its share cannot keep a second caller's
  turn, or /healthz, out: past its share it is told 429 with ``Retry-After``.

Other loopback addresses (127.0.0.2, ...) are other sources to the server.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import model_env, received
from tests.support.certs import client_context, new_ca, write_tls_dir
from tests.support.eventually import eventually
from tests.support.hold import (
    SILENT,
    closed_count,
    hold,
    open_files_at_least,
    past_share,
    requests_held,
)
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

Caller = Callable[[str], ssl.SSLContext]
Runtime = Callable[..., tuple[Server, Caller, Server]]

_PROBES = "ankka serve: probes on "


@pytest.fixture
def runtime(tmp_path: Path, standin: Callable[[object], Server]) -> Iterator[Runtime]:
    """``runtime(script, *args)``: ``ankka serve`` with mTLS and a probe port, limited to 512
    open files; a maker of client contexts for a caller name; the stand-in model."""
    ca = new_ca()
    tls_dir = write_tls_dir(
        tmp_path / "tls", leaf=ca.issue("ankka://service/shop/runtime", server=True), ca_pem=ca.pem
    )
    servers: list[Server] = []

    def caller(name: str) -> ssl.SSLContext:
        return client_context(ca, ca.issue(f"ankka://service/shop/{name}"), tmp_path, stem=name)

    def make(script: object, *args: str) -> tuple[Server, Caller, Server]:
        model = standin(script)
        store = f"sqlite:///{tmp_path / 'sessions.sqlite3'}"
        command = ankka_command(
            "serve", "tests.integration.services:service", "--port", "0", "--store", store,
            "--tls-dir", str(tls_dir), "--probe-port", "0", *args,
        )  # fmt: skip
        server = start(command, env=model_env(model.url), max_files=512)
        servers.append(server)
        return server, caller, model

    yield make
    for server in servers:
        server.stop()


def _probe_url(server: Server) -> str:
    line = next(line for line in server.output if _PROBES in line)
    return line.split(_PROBES, 1)[1].split()[0]


def _address(server: Server) -> tuple[str, int]:
    url = httpx.URL(server.url)
    assert url.host and url.port
    return url.host, url.port


def test_sockets_that_never_start_tls_keep_neither_a_caller_nor_the_probes_out(
    runtime: Runtime,
) -> None:
    server, caller, _ = runtime([], "--max-connections", "64", "--handshake-timeout", "3")
    host, port = _address(server)
    url = server.url.replace("http://", "https://")
    open_files_at_least(2048)

    # 600 from one address: more than the process's 512 files, never a ClientHello.
    with hold(host, port, 600, send=SILENT, source="127.0.0.2") as silent:
        with httpx.Client(verify=caller("alice"), timeout=10) as client:
            served = client.get(f"{url}/v1/agents")
        probed = httpx.get(f"{_probe_url(server)}/healthz", timeout=10)
        closed = closed_count(silent, len(silent), within=20)

    assert served.status_code == 200, "a real mTLS caller is served through the crowd"
    assert probed.status_code == 200, "the probe port is still up"
    assert closed == len(silent), "past the cap they were closed, the rest at the deadline"
    assert "Too many open files" not in "".join(server.output)


def _stream_request(host: str, port: int, session: str) -> bytes:
    body = json.dumps({"message": "hold on"}).encode()
    return (
        f"POST /v1/agents/streamer/sessions/{session} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nAccept: text/event-stream\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def test_one_callers_streams_do_not_keep_another_caller_or_the_probes_out(
    runtime: Runtime,
) -> None:
    # 16 connections, so a caller's share is 8: alice's first 8 streams wait on a slow model.
    slow = [{"text": "late", "delay_ms": 20_000}] * 8
    server, caller, model = runtime([*slow, {"text": "hi bob"}], "--max-connections", "16")
    host, port = _address(server)
    url = server.url.replace("http://", "https://")

    requests = [_stream_request(host, port, f"alice-{i}") for i in range(16)]
    with requests_held(host, port, caller("alice"), requests) as streams:
        refused = [s.recv(4096) for s in streams[8:]]  # past her share: answered at once
        eventually(lambda: len(received(model)) >= 8, what="alice's 8 streams at the model")
        with httpx.Client(verify=caller("bob"), timeout=30) as bob:
            turn = bob.post(f"{url}/v1/agents/polite/sessions/bob", json={"message": "hi"})
            health = bob.get(f"{url}/healthz")

    assert all(past_share(answer) for answer in refused), refused[0][:300]
    assert turn.status_code == 200, turn.text
    assert turn.json()["reply"] == "hi bob"
    assert health.status_code == 200
