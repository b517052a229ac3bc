"""Loopback is not the open web (issue 31, item 4), over a real ``ankka serve`` on loopback.

A web page the user visits reaches loopback too; a DNS-rebinding page even passes the console's
``Origin`` check, since its own name resolves to 127.0.0.1. What it cannot change is the
``Host`` its requests carry: a name the runtime does not serve is answered 421 before any route
runs, and nothing is written or decided. The console's form also needs the token its page set
(a cookie and a hidden field), and no answer may be framed by another site.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Script
from tests.support.processes import Server

pytestmark = pytest.mark.integration

TARGET = "tests.integration.approval_services:service"
REFUND: Script = [
    {"tool_calls": [{"name": "refund", "arguments": {"order": "A1", "amount": 250}}]},
    {"text": "Refunded A1."},
]


def _port(server: Server) -> str:
    return server.url.rsplit(":", 1)[1]


def _waiting(server: Server, session: str) -> dict[str, Any]:
    answer = httpx.post(
        f"{server.url}/v1/agents/refunds/sessions/{session}",
        json={"message": "refund A1"},
        timeout=30,
    )
    assert answer.status_code == 202, answer.text
    approval: dict[str, Any] = answer.json()["approvals"][0]
    return approval


def _states(server: Server, session: str) -> list[str]:
    listed = httpx.get(f"{server.url}/v1/approvals", params={"session": session}).json()
    return [a["state"] for a in listed["approvals"]]


def test_a_rebinding_page_is_refused_by_its_host_and_decides_nothing(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    server = serve(
        standin(REFUND).url,
        target=TARGET,
        env={"ANKKA_CONSOLE": "on"},
        args=["--allowed-host", "agents.example.com"],
    )
    approval = _waiting(server, "r1")
    port = _port(server)
    evil = f"evil.example:{port}"
    form = {"decision": "approve", "digest": approval["digest"], "session": "r1"}

    # The rebinding page: same origin as far as the browser knows, Host its own name.
    rebound = httpx.post(
        f"{server.url}/console/approvals/{approval['id']}",
        data=form,
        headers={"Host": evil, "Origin": f"http://{evil}"},
    )
    assert rebound.status_code == 421, rebound.text
    assert rebound.json()["error"]["type"] == "misdirected_request"
    assert "'evil.example'" in rebound.json()["error"]["message"]
    turned = httpx.post(
        f"{server.url}/v1/agents/refunds/sessions/cross",
        json={"message": "refund A1"},
        headers={"Host": evil},
    )
    assert turned.status_code == 421
    cancelled = httpx.post(f"{server.url}/v1/tasks/t1/cancel", headers={"Host": evil})
    assert cancelled.status_code == 421
    assert _states(server, "r1") == ["pending"]
    assert httpx.get(f"{server.url}/v1/sessions/cross/messages").json()["messages"] == []

    # Addresses, localhost and the names the runtime was given are served.
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "agents.example.com", "runtime"):
        seen = httpx.get(f"{server.url}/v1/agents", headers={"Host": host})
        assert seen.status_code == 200, (host, seen.text)


def test_the_consoles_form_needs_its_pages_token_and_nothing_is_framed(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    server = serve(standin(REFUND).url, target=TARGET, env={"ANKKA_CONSOLE": "on"})
    approval = _waiting(server, "r2")
    form = {"decision": "approve", "digest": approval["digest"], "session": "r2"}
    origin = {"Origin": server.url}

    # Same origin, but no token, or a token of the sender's own making: refused.
    forged = httpx.post(
        f"{server.url}/console/approvals/{approval['id']}", data=form, headers=origin
    )
    assert forged.status_code == 403, forged.text
    made_up = "A" * 43
    cookie = {"Cookie": f"ankka_console_form={made_up}x", **origin}
    guessed = httpx.post(
        f"{server.url}/console/approvals/{approval['id']}",
        data={**form, "form_token": made_up},
        headers=cookie,
    )
    assert guessed.status_code == 403, guessed.text
    assert _states(server, "r2") == ["pending"]

    # From the page itself: its cookie and its field match.
    with httpx.Client(base_url=server.url, timeout=30) as browser:
        page = browser.get("/console/approvals")
        assert page.status_code == 200
        assert page.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert "samesite=strict" in page.headers["set-cookie"].lower()
        token = re.search(r'name="form_token" value="([^"]+)"', page.text)
        assert token is not None
        decided = browser.post(
            f"/console/approvals/{approval['id']}",
            data={**form, "form_token": token.group(1)},
            headers=origin,
        )
        assert decided.status_code == 303, decided.text
    assert _states(server, "r2") == ["approved"]

    api = httpx.get(f"{server.url}/v1/agents")
    assert api.headers["x-frame-options"] == "DENY"
    assert api.headers["content-security-policy"] == "frame-ancestors 'none'"
