"""What the gateway's own HTTP/1.1 server (``ankka/gateway/server.py``) must get right on the
wire: malformed requests, pipelining, chunked bodies, ``Expect: 100-continue``, HTTP/1.0,
HEAD, oversized bodies and half-closed clients. Each test speaks raw bytes over a socket to a
real ``ankka gateway`` in front of a real stand-in."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from tests.integration.gateway.conftest import (
    Gateway,
    Standin,
    StartGateway,
    StartStandin,
    standin_model,
)
from tests.support.eventually import eventually
from tests.support.hold import read_until_closed

pytestmark = pytest.mark.integration

_MODELS = {"small": {"capabilities": ["completion"]}}
_CHAT = b'{"model":"small","messages":[{"role":"user","content":"hi"}]}'


def _turns(count: int) -> dict[str, object]:
    return {"turns": [{"text": f"answer {n}"} for n in range(count)], "models": _MODELS}


def _connect(gateway: Gateway) -> socket.socket:
    url = httpx.URL(gateway.url)
    assert url.host and url.port
    return socket.create_connection((url.host, url.port), timeout=10)


def _exchange(gateway: Gateway, data: bytes) -> bytes:
    """Send ``data`` and read until the gateway closes the connection."""
    with _connect(gateway) as sock:
        sock.sendall(data)
        return read_until_closed(sock)


def _chat_head(length: int | None, *extra: bytes) -> bytes:
    framing = b"Transfer-Encoding: chunked" if length is None else b"Content-Length: %d" % length
    lines = [b"POST /v1/chat/completions HTTP/1.1", b"Host: x", framing, *extra]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _body_of(answer: bytes) -> dict[str, object]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-length" in head.lower()
    value: dict[str, object] = json.loads(body)
    return value


def test_a_malformed_request_is_400_in_the_error_shape_and_closes(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(_turns(0))
    gateway = start_gateway([standin_model(standin.url)])

    answer = _exchange(gateway, b"GET /healthz HTTP/1.1\r\nHost x\r\n\r\n")

    assert answer.startswith(b"HTTP/1.1 400")
    assert b"connection: close" in answer.lower()
    error = _body_of(answer)["error"]
    assert isinstance(error, dict) and error["code"] == "invalid_http"


def test_pipelined_requests_are_answered_in_order_on_one_connection(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(_turns(1))
    gateway = start_gateway([standin_model(standin.url)])
    pipelined = (
        _chat_head(len(_CHAT))
        + _CHAT
        + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        + b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )

    answer = _exchange(gateway, pipelined)

    assert answer.count(b"HTTP/1.1 200 OK\r\n") == 3
    chat, health, models = (
        answer.index(b"answer 0"),
        answer.index(b'{"ok": true}'),
        answer.index(b'"object": "list"'),
    )
    assert chat < health < models


def test_a_chunked_body_is_forwarded_whole(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(_turns(1))
    gateway = start_gateway([standin_model(standin.url)])
    half = len(_CHAT) // 2
    chunked = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (
        half,
        _CHAT[:half],
        len(_CHAT) - half,
        _CHAT[half:],
    )

    answer = _exchange(gateway, _chat_head(None, b"Connection: close") + chunked)

    assert answer.startswith(b"HTTP/1.1 200")
    assert b"answer 0" in answer
    [chat] = standin.chats()
    assert chat["body"]["messages"] == [{"role": "user", "content": "hi"}]


def test_expect_100_continue_is_answered_before_the_body_is_sent(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(_turns(1))
    gateway = start_gateway([standin_model(standin.url)])
    with _connect(gateway) as sock:
        sock.sendall(_chat_head(len(_CHAT), b"Expect: 100-continue", b"Connection: close"))
        interim = sock.recv(4096)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(_CHAT)
        answer = read_until_closed(sock)

    assert answer.startswith(b"HTTP/1.1 200")
    assert b"answer 0" in answer


def test_a_body_declared_past_the_limit_gets_413_without_100_continue(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(_turns(0))
    gateway = start_gateway([standin_model(standin.url)], args=["--max-body-bytes", "1000"])

    answer = _exchange(gateway, _chat_head(5000, b"Expect: 100-continue"))

    assert answer.startswith(b"HTTP/1.1 413")
    error = _body_of(answer)["error"]
    assert isinstance(error, dict) and error["code"] == "request_too_large"
    assert standin.chats() == []


def test_a_chunked_body_past_the_limit_gets_413_and_the_connection_closes(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(_turns(0))
    gateway = start_gateway([standin_model(standin.url)], args=["--max-body-bytes", "1000"])
    piece = b"x" * 600
    chunked = b"%x\r\n%s\r\n" % (len(piece), piece) * 2  # no end: the gateway must not wait

    answer = _exchange(gateway, _chat_head(None) + chunked)

    assert answer.startswith(b"HTTP/1.1 413")
    assert b"connection: close" in answer.lower()
    assert standin.chats() == []


def test_http_1_0_is_answered_and_closed_and_a_stream_ends_with_the_connection(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(_turns(1))
    gateway = start_gateway([standin_model(standin.url)])
    stream = b'{"model":"small","stream":true,"messages":[{"role":"user","content":"hi"}]}'
    head = b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % len(stream)

    health = _exchange(gateway, b"GET /healthz HTTP/1.0\r\n\r\n")
    answer = _exchange(gateway, head + stream)

    assert health.startswith(b"HTTP/1.1 200") and health.endswith(b'{"ok": true}')
    assert answer.startswith(b"HTTP/1.1 200")
    head_part, _, body = answer.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head_part.lower()  # HTTP/1.0 has no chunked encoding
    assert body.startswith(b"data: ") and body.rstrip().endswith(b"data: [DONE]")


def test_a_kept_alive_connection_serves_http_1_0_that_asks_for_it(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(_turns(0))
    gateway = start_gateway([standin_model(standin.url)])
    ask = b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"

    answer = _exchange(gateway, ask + b"GET /healthz HTTP/1.0\r\n\r\n")

    assert answer.count(b"HTTP/1.1 200 OK") == 2
    assert answer.lower().count(b"connection: keep-alive") == 1


def test_head_gets_the_head_of_the_answer_and_no_body(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(_turns(0))
    gateway = start_gateway([standin_model(standin.url)])

    answer = _exchange(gateway, b"HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")

    assert answer.startswith(b"HTTP/1.1 405")
    assert answer.endswith(b"\r\n\r\n"), "no body after the head"


def test_a_client_half_closing_mid_body_is_a_caller_leaving_and_nothing_is_sent(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin = start_standin(_turns(1))
    gateway = start_gateway([standin_model(standin.url)])
    counted = 'ankka_gateway_caller_disconnects_total{caller="anonymous",model="(unknown)"} 1.0'
    with _connect(gateway) as sock:
        sock.sendall(_chat_head(len(_CHAT)) + _CHAT[:10])
        sock.shutdown(socket.SHUT_WR)
        assert read_until_closed(sock) == b""
    eventually(lambda: counted in gateway.metrics(), what="the gateway to count the caller leaving")
    assert standin.chats() == []


def test_the_uvicorn_server_is_a_setting_away(
    start_standin: StartStandin, start_gateway: StartGateway
) -> None:
    standin: Standin = start_standin(_turns(1))
    gateway = start_gateway([standin_model(standin.url)], args=["--server", "uvicorn"])

    answer = httpx.post(f"{gateway.openai_url}/chat/completions", content=_CHAT)

    assert answer.status_code == 200
    assert answer.headers["server"] == "uvicorn"
