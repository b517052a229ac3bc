"""An agent against an MCP server behind OAuth 2.1, end to end, every part a real process.

The server is examples/mcp_oauth_catalog.py: the official SDK's resource server (401 with
``WWW-Authenticate``, protected-resource metadata, scope and audience checks) and a small
authorization server on the same port whose access tokens live two seconds. The agent is
``ankka serve examples.shop:service`` with the stand-in as its model (and, for an autonomous
agent's tasks, tests/integration/asking_services.py's ``purchaser``). What the authorization
server granted is read from its own log (``token grant=...``), so each test asserts which grants
were made, not only that the turns were answered.
"""

from __future__ import annotations

import html
import json
import re
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import model_env, received
from tests.integration.test_mcp import (
    Rig,
    ask,
    conversation,
    journal_text,
    rig,
    search,
    stop_cleanly,
)
from tests.support.eventually import eventually
from tests.support.processes import REPO, Server, ankka_command, start

pytestmark = pytest.mark.integration
__all__ = ["rig"]  # the fixture, shared with test_mcp.py

SECRET = "cs-canary-41f0c2d9e7"
PREFIX = "ANKKA_MCP_CATALOG_"


def oauth_catalog(rig: Rig, *clients: str) -> Server:
    command = [sys.executable, str(REPO / "examples" / "mcp_oauth_catalog.py"), "--port", "0"]
    for client in clients:
        command += ["--client", client]
    return rig._keep(start([*command, "--token-seconds", "2"]))


def grants(server: Server) -> list[str]:
    return re.findall(r"token grant=(\S+)", "".join(server.output))


def wait_until_expired(server: Server) -> None:
    """Until the last access token is past the time the authorization server gave it."""
    expires = max(int(t) for t in re.findall(r"token expires_at=(\d+)", "".join(server.output)))
    eventually(lambda: time.time() > expires + 0.5, what="the access token to expire")


def issued_tokens(credentials: Path) -> list[str]:
    document = json.loads(credentials.read_text())
    found = []
    for entry in document["issuers"].values():
        for token in entry.get("tokens", {}).values():
            found += [token["access_token"], token.get("refresh_token", "")]
    return [t for t in found if t]


def unattended(mcp: Server, credentials: Path) -> dict[str, str]:
    """The settings of the client-credentials flow, credentials kept in ``credentials``."""
    return {
        f"{PREFIX}URL": mcp.url,
        f"{PREFIX}OAUTH": "client_credentials",
        f"{PREFIX}OAUTH_CLIENT_ID": "ankka",
        f"{PREFIX}OAUTH_CLIENT_SECRET": SECRET,
        f"{PREFIX}OAUTH_ISSUER": mcp.url.removesuffix("mcp"),
        "ANKKA_MCP_CREDENTIALS": f"file:{credentials}",
    }


def shop(
    rig: Rig, model: Server, env: dict[str, str], *args: str, target: str = "examples.shop:service"
) -> Server:
    store = f"sqlite:///{rig.tmp_path / 'shop.sqlite3'}"
    command = ankka_command("serve", target, "--port", "0", "--store", store)
    return rig._keep(start([*command, *args], env={**model_env(model.url), **env}))


def ready(server: Server) -> bool:
    return httpx.get(f"{server.url}/readyz").status_code == 200


def test_an_unattended_agent_gets_a_token_and_a_new_one_when_it_expires(rig: Rig) -> None:
    mcp = oauth_catalog(rig, f"ankka:{SECRET}")
    model = rig.standin([*search("kettle"), *search("mug")])
    credentials = rig.tmp_path / "credentials.json"
    env = unattended(mcp, credentials)
    server = shop(rig, model, env)
    eventually(lambda: ready(server), what="the shop ready with its OAuth server")
    assert ask(server, "Kettles?").status_code == 200
    assert "Steel kettle" in conversation(server)[2]["content"]
    before = grants(mcp)
    assert before and set(before) == {"client_credentials"}

    wait_until_expired(mcp)
    answered = ask(server, "Mugs?")
    assert answered.status_code == 200, answered.text
    assert "Stoneware mug" in conversation(server)[-2]["content"]
    after = grants(mcp)  # a new token for the expired one, by the same grant
    assert len(after) > len(before) and set(after) == {"client_credentials"}

    tokens = issued_tokens(credentials)
    assert tokens, "the credentials file keeps the tokens"
    seen = [
        httpx.get(f"{server.url}/metrics").text,
        httpx.get(f"{server.url}/readyz").text,
        json.dumps(conversation(server)),
        journal_text(rig.tmp_path),
        stop_cleanly(server),
    ]
    for text in seen:
        for secret in (SECRET, *tokens):
            assert secret not in text


def test_an_autonomous_agents_tasks_get_a_token_and_a_new_one_when_it_expires(rig: Rig) -> None:
    """The same unattended flow for a task of an autonomous agent: nobody calls a turn, the
    task's own iterations reach the server, and the second task, after the token expired, gets
    a new one by the same grant."""
    mcp = oauth_catalog(rig, f"ankka:{SECRET}")

    def searched(query: str) -> list[dict[str, object]]:
        done = {"name": "complete_task", "arguments": {"title": query, "points": [query]}}
        return [search(query)[0], {"tool_calls": [done]}]

    model = rig.standin([*searched("kettle"), *searched("mug")])
    env = unattended(mcp, rig.tmp_path / "credentials.json")
    server = shop(rig, model, env, target="tests.integration.asking_services:service")
    eventually(lambda: ready(server), what="the runtime ready with its OAuth server")

    def task(name: str, product: str) -> dict[str, object]:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            body = {"type": "summary", "instructions": f"Find a {product}."}
            assert client.put(f"/v1/agents/purchaser/tasks/{name}", json=body).status_code == 201
            record: dict[str, object] = client.get(f"/v1/tasks/{name}", params={"wait": 50}).json()
        return record

    first = task("t1", "kettle")
    assert first["state"] == "completed", first
    assert "Steel kettle" in received(model)[1]["body"]["messages"][-1]["content"]
    before = grants(mcp)
    assert before and set(before) == {"client_credentials"}

    wait_until_expired(mcp)
    second = task("t2", "mug")
    assert second["state"] == "completed", second
    assert "Stoneware mug" in received(model)[3]["body"]["messages"][-1]["content"]
    after = grants(mcp)
    assert len(after) > len(before) and set(after) == {"client_credentials"}
    tokens = issued_tokens(rig.tmp_path / "credentials.json")
    assert tokens
    for text in (journal_text(rig.tmp_path), stop_cleanly(server)):
        for secret in (SECRET, *tokens):
            assert secret not in text


def test_a_person_consents_on_the_console_and_the_refreshed_token_outlives_a_restart(
    rig: Rig,
) -> None:
    mcp = oauth_catalog(rig, "ankka:")  # a public client: no secret, PKCE only
    model = rig.standin([*search("kettle"), *search("mug"), *search("teapot")])
    credentials = rig.tmp_path / "credentials.json"
    env = {
        f"{PREFIX}URL": mcp.url,
        f"{PREFIX}OAUTH": "consent",
        f"{PREFIX}OAUTH_CLIENT_ID": "ankka",
        "ANKKA_MCP_CREDENTIALS": f"file:{credentials}",
    }
    server = shop(rig, model, env, "--console", "on")
    waiting = eventually(
        lambda: "consent" in httpx.get(f"{server.url}/readyz").text, what="a consent to wait"
    )
    assert waiting
    page = httpx.get(f"{server.url}/console/mcp").text
    (link,) = re.findall(r'<a href="([^"]+)" rel="noreferrer">consent', page)
    # The person follows the link; the authorization server sends them back to the runtime.
    approved = httpx.get(html.unescape(link), follow_redirects=False)
    assert approved.status_code == 302
    back = approved.headers["location"]
    assert back.startswith(f"{server.url}/v1/mcp/oauth/callback?")
    thanked = httpx.get(back)
    assert thanked.status_code == 200 and "Thank you" in thanked.text
    assert httpx.get(back).status_code == 404  # a consent is answered once
    eventually(lambda: ready(server), what="the shop ready after the consent")
    kettles = ask(server, "Kettles?")
    assert kettles.status_code == 200, "".join(server.output) + "".join(mcp.output)
    assert grants(mcp)[0] == "authorization_code"

    wait_until_expired(mcp)
    mugs = ask(server, "Mugs?")
    assert mugs.status_code == 200, "".join(server.output) + "".join(mcp.output)
    assert "Stoneware mug" in conversation(server)[-2]["content"]
    # Refreshed, never consented again (a token of two seconds may be refreshed twice a turn).
    first_code, *refreshes = grants(mcp)
    assert first_code == "authorization_code"
    assert refreshes and set(refreshes) == {"refresh_token"}
    first = stop_cleanly(server)

    # A restart reads the stored refresh token: no second consent.
    wait_until_expired(mcp)
    again = shop(rig, model, env, "--console", "on")
    eventually(lambda: ready(again), what="the restarted shop ready without a consent")
    assert ask(again, "Teapots?").status_code == 200
    assert "Cast-iron teapot" in conversation(again)[-2]["content"]
    after = grants(mcp)
    assert after.count("authorization_code") == 1 and len(after) > 1 + len(refreshes)
    assert set(after[1:]) == {"refresh_token"}
    assert "".join(mcp.output).count("consented for") == 1

    tokens = issued_tokens(credentials)
    for text in (first, journal_text(rig.tmp_path), stop_cleanly(again)):
        for token in tokens:
            assert token not in text
