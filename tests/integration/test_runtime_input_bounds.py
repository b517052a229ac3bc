"""``ankka serve`` bounds its input (issue 13, defects 1 and 7): the body's size (413 from
``Content-Length`` before reading, and for a chunked body as it passes the limit), the session
id's form, JSON nesting; routing errors in the API's shape; a caller who leaves mid-body is
counted, not traced; ``--access-log`` logs."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.integration.conftest import model_env
from tests.support.eventually import eventually
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

Serve = Callable[..., Server]
_NO_MODEL = "http://127.0.0.1:9"  # no test here reaches a model


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One ``ankka serve`` with the default limits for the tests that only send it what it
    refuses (or read what it holds), each on a session of its own: a refusal writes nothing
    another could read, so they need not start a server each."""
    store = f"sqlite:///{tmp_path_factory.mktemp('bounded') / 'sessions.sqlite3'}"
    command = ankka_command("serve", "tests.integration.services:service", "--port", "0")
    server = start([*command, "--store", store], env=model_env(_NO_MODEL))
    yield server
    server.stop()


def _turn(server: Server, session: str = "s", **kwargs: object) -> httpx.Response:
    url = f"{server.url}/v1/agents/polite/sessions/{session}"
    return httpx.post(url, timeout=30, **kwargs)  # type: ignore[arg-type]


def _post_head(server: Server, length: int) -> socket.socket:
    """A connection that has sent a turn's head declaring ``length`` bytes of body."""
    url = httpx.URL(server.url)
    assert url.host and url.port
    sock = socket.create_connection((url.host, url.port), timeout=10)
    sock.sendall(
        b"POST /v1/agents/polite/sessions/s HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % length
    )
    return sock


def _messages(server: Server, raw_session: str) -> httpx.Response:
    return httpx.get(f"{server.url}/v1/sessions/{raw_session}/messages", timeout=10)


def test_a_declared_length_past_the_limit_is_refused_before_the_body_is_sent(
    bounded: Server,
) -> None:
    server = bounded
    with _post_head(server, 100_000_000_000) as sock:
        answer = b""
        while b"}}" not in answer:  # the head and the JSON error, in however many reads
            chunk = sock.recv(65536)
            assert chunk, f"the server closed the connection after {answer!r}"
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413")
    assert b"request_too_large" in answer and b"1048576 bytes" in answer


def test_a_message_past_the_default_limit_is_413_and_nothing_is_written(bounded: Server) -> None:
    server = bounded

    answer = _turn(server, "too-big", json={"message": "x" * (2 * 1024 * 1024)})

    assert answer.status_code == 413
    assert answer.json()["error"]["type"] == "request_too_large"
    assert _messages(server, "too-big").json()["messages"] == []


def test_a_chunked_body_is_cut_off_as_it_passes_a_configured_limit(serve: Serve) -> None:
    server = serve(_NO_MODEL, args=["--max-body-bytes", "100000"])

    def chunked() -> Iterator[bytes]:  # no Content-Length: sent with chunked encoding
        yield b'{"message": "'
        for _ in range(200):
            yield b"x" * 10_000
        yield b'"}'

    answer = _turn(server, content=chunked())

    assert answer.status_code == 413
    assert "100000 bytes" in answer.json()["error"]["message"]


@pytest.mark.parametrize(
    "raw",
    ["%FF", "%FE", "a%2Fb", "a%2fb", "x" * 257, "tab%09", "%00"],
    ids=["ff", "fe", "slash", "lower-slash", "long", "control", "nul"],
)
def test_a_session_id_outside_the_rule_is_400(bounded: Server, raw: str) -> None:
    server = bounded

    for answer in (_messages(server, raw), _turn(server, raw, json={"message": "hi"})):
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["type"] == "invalid_session_id"


def test_a_session_id_at_the_limit_and_in_any_script_is_fine(bounded: Server) -> None:
    server = bounded

    assert _messages(server, "x" * 256).status_code == 200
    answer = _messages(server, "%C3%A5%E6%97%A5")  # "å日", valid UTF-8
    assert answer.status_code == 200
    assert answer.json()["session"] == "å日"


def test_deeply_nested_json_is_invalid_json(bounded: Server) -> None:
    server = bounded

    answer = _turn(
        server, "nested", content=b'{"message":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    )

    assert answer.status_code == 400
    assert answer.json()["error"]["type"] == "invalid_json"


def test_routing_errors_are_in_the_api_shape_and_a_405_says_what_is_allowed(
    bounded: Server,
) -> None:
    server = bounded

    trace = httpx.request("TRACE", f"{server.url}/v1/agents", timeout=10)
    unknown = httpx.get(f"{server.url}/v1/nothing-here", timeout=10)

    assert trace.status_code == 405
    assert "GET" in trace.headers["allow"]
    assert trace.json()["error"]["type"] == "method_not_allowed"
    assert unknown.status_code == 404
    assert unknown.json()["error"]["type"] == "not_found"


def test_a_caller_who_leaves_mid_body_is_counted_not_traced(serve: Serve) -> None:
    server = serve(_NO_MODEL)
    with _post_head(server, 100) as sock:
        sock.sendall(b'{"message": ')  # and then leave
    eventually(
        lambda: "ankka_caller_disconnects_total 1.0" in httpx.get(f"{server.url}/metrics").text,
        what="the server to count the disconnect",
    )
    output = server.stop()

    assert "Traceback" not in output and "unexpected failure" not in output


def test_access_log_logs_each_request(serve: Serve) -> None:
    server = serve(_NO_MODEL, args=["--access-log"])

    httpx.get(f"{server.url}/healthz", timeout=10)
    output = server.stop()

    assert '"GET /healthz HTTP/1.1" 200' in output
