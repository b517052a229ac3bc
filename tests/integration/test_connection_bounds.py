"""``ankka serve`` bounds its connections: idle sockets cannot keep a real caller out, and a
connection that sends nothing, or stops mid-head or mid-body, is closed (issue 13, defect 2).
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.support.hold import MID_BODY, MID_HEAD, SILENT, closed_count, hold, read_until_closed
from tests.support.processes import Server

pytestmark = pytest.mark.integration

Serve = Callable[..., Server]
_NO_MODEL = "http://127.0.0.1:9"  # these tests never reach a model


def _address(server: Server) -> tuple[str, int]:
    url = httpx.URL(server.url)
    assert url.host and url.port
    return url.host, url.port


def test_idle_connections_past_the_cap_do_not_keep_a_real_caller_out(serve: Serve) -> None:
    server = serve(_NO_MODEL, args=["--max-connections", "8", "--header-timeout", "60"])
    host, port = _address(server)

    with hold(host, port, 40, send=SILENT) as silent, hold(host, port, 5, send=MID_HEAD) as slow:
        answer = httpx.get(f"{server.url}/healthz", timeout=10)
        closed = closed_count(silent + slow, 40 + 5 - 8 + 1)

    assert answer.status_code == 200
    assert closed >= 40 + 5 - 8 + 1, "the oldest idle connections made room"


def test_a_connection_that_sends_nothing_or_stops_is_closed(serve: Serve) -> None:
    server = serve(_NO_MODEL, args=["--header-timeout", "1", "--body-timeout", "1"])
    host, port = _address(server)

    with (
        hold(host, port, 1, send=SILENT) as [silent],
        hold(host, port, 1, send=MID_HEAD) as [mid_head],
        hold(host, port, 1, send=MID_BODY) as [mid_body],
    ):
        assert read_until_closed(silent) == b""
        assert read_until_closed(mid_head).startswith(b"HTTP/1.1 408")
        read_until_closed(mid_body)  # returns only because the server closed it
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200


def test_when_every_connection_is_working_a_newcomer_is_told_to_retry(serve: Serve) -> None:
    server = serve(_NO_MODEL, args=["--max-connections", "4", "--body-timeout", "2"])
    host, port = _address(server)

    with hold(host, port, 4, send=MID_BODY) as working:
        refused = httpx.get(f"{server.url}/v1/agents", timeout=10)
        probed = httpx.get(f"{server.url}/healthz", timeout=10)
        for sock in working:
            read_until_closed(sock)  # the body timeout ends them
        answered = httpx.get(f"{server.url}/v1/agents", timeout=10)

    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert probed.status_code == 200, "health paths have a reserve past the cap (issue 31)"
    assert answered.status_code != 503


def test_a_head_past_the_limit_is_431(serve: Serve) -> None:
    server = serve(_NO_MODEL, args=["--max-header-bytes", "4096"])

    answer = httpx.get(f"{server.url}/healthz", headers={"x-big": "a" * 10_000}, timeout=10)

    assert answer.status_code == 431
