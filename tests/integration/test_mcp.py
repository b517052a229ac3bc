"""MCP tools end to end: the catalogue (examples/mcp_catalog.py, the official SDK's server) as
a process on loopback, the shop agent (examples/shop.py) under ``ankka serve``, the stand-in
as the model."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import httpx
import pytest

from tests.integration.conftest import Script, model_env, received
from tests.support.eventually import eventually
from tests.support.processes import REPO, Server, ankka_command, start

pytestmark = pytest.mark.integration

SHOP_SCRIPT = json.loads((REPO / "examples" / "shop-standin.json").read_text())
CANARY = "canary-7c1e5b0f-header-value"


def search(query: str, answer: str = "Done.") -> list[dict[str, Any]]:
    return [
        {"tool_calls": [{"name": "mcp__catalog__search", "arguments": {"query": query}}]},
        {"text": answer},
    ]


def port_of(server: Server) -> str:
    return server.url.rsplit(":", 1)[1].split("/")[0]


def catalog_command(*args: str) -> list[str]:
    return [sys.executable, str(REPO / "examples" / "mcp_catalog.py"), *args]


@dataclass(frozen=True)
class Rig:
    """The processes of one test: catalogues, stand-ins and ``ankka serve examples.shop:service``
    (every one stopped after the test), and the test's folder, where the shop's store lives."""

    tmp_path: Path
    standin: Callable[[Script], Server]
    started: list[Server] = field(default_factory=list)

    def catalog(self, *args: str) -> Server:
        """The catalogue (``--port 0`` unless given)."""
        extra = args if "--port" in args else ("--port", "0", *args)
        return self._keep(start(catalog_command(*extra)))

    def shop(self, standin_url: str, mcp_env: dict[str, str]) -> Server:
        """The shop with the stand-in as its model and ``mcp_env`` (ANKKA_MCP_* settings)."""
        store = f"sqlite:///{self.tmp_path / 'shop.sqlite3'}"
        command = ankka_command("serve", "examples.shop:service", "--port", "0", "--store", store)
        return self._keep(start(command, env={**model_env(standin_url), **mcp_env}))

    def open(self, script: Script, *catalog_args: str, **mcp_env: str) -> Opened:
        """A catalogue, a stand-in on ``script`` and the shop with the catalogue configured;
        ``mcp_env`` adds ANKKA_MCP_CATALOG_<KEY> settings."""
        mcp = self.catalog(*catalog_args)
        model = self.standin(script)
        env = {f"ANKKA_MCP_CATALOG_{key.upper()}": value for key, value in mcp_env.items()}
        server = self.shop(model.url, {"ANKKA_MCP_CATALOG_URL": mcp.url, **env})
        return Opened(mcp, model, server)

    def _keep(self, server: Server) -> Server:
        self.started.append(server)
        return server


class Opened(NamedTuple):
    mcp: Server
    model: Server
    server: Server


R = TypeVar("R", bound=Rig)


def kept(made: R) -> Iterator[R]:
    """A fixture's body: ``made``, and every process it started stopped after the test."""
    yield made
    for server in made.started:
        server.stop()


@pytest.fixture
def rig(tmp_path: Path, standin: Callable[[Script], Server]) -> Iterator[Rig]:
    yield from kept(Rig(tmp_path, standin))


def ask(server: Server, message: str, session: str = "s") -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/agents/shop/sessions/{session}", json={"message": message}, timeout=60
    )


def conversation(server: Server, session: str = "s") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = httpx.get(
        f"{server.url}/v1/sessions/{session}/messages"
    ).json()["messages"]
    return messages


def journal(tmp_path: Path) -> list[tuple[str, dict[str, Any]]]:
    with sqlite3.connect(tmp_path / "shop.sqlite3") as db:
        rows = db.execute("SELECT kind, body FROM events ORDER BY session, seq").fetchall()
    return [(kind, json.loads(body)) for kind, body in rows]


def journal_text(tmp_path: Path) -> str:
    with sqlite3.connect(tmp_path / "shop.sqlite3") as db:
        return "\n".join(r[0] for r in db.execute("SELECT body FROM events"))


def offered_tools(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request["body"].get("tools", [])]


def wait_ready(server: Server, *, within: float = 60.0) -> None:
    def ready() -> bool:
        answer = httpx.get(f"{server.url}/readyz")
        assert answer.status_code == 200, answer.text  # shown when the wait gives up
        return True

    eventually(ready, what=f"{server.url} to be ready", timeout=within, interval=0.2)


def stop_cleanly(server: Server) -> str:
    """SIGTERM, then the whole output; a clean shutdown has no traceback in it."""
    output = server.stop()
    assert server.process.returncode == 0, output
    for sign in ("Traceback", "ERROR", "cancel scope", "Task was destroyed", "Exception"):
        assert sign not in output, output
    return output


def test_the_shop_agent_answers_with_the_catalogue_tool(rig: Rig) -> None:
    _, model, server = rig.open([*SHOP_SCRIPT, *search("kettle")])
    assert httpx.get(f"{server.url}/readyz").json() == {"ok": True}

    answer = ask(server, "Do you have kettles?")
    assert answer.status_code == 200, answer.text
    assert answer.json()["reply"] == SHOP_SCRIPT[1]["text"]
    sent = received(model)
    assert "mcp__catalog__search" in offered_tools(sent[0])
    declared = next(t for t in sent[0]["body"]["tools"] if t["function"]["name"].startswith("mcp"))
    assert declared["function"]["description"].startswith("Search the product catalogue")
    assert declared["function"]["parameters"]["required"] == ["query"]
    tool_message = sent[1]["body"]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "Steel kettle" in tool_message["content"] and "Glass kettle" in tool_message["content"]
    tool_result = conversation(server)[2]
    assert tool_result["name"] == "mcp__catalog__search"
    assert "Steel kettle" in tool_result["content"] and not tool_result["is_error"]

    assert ask(server, "And kettles again?").status_code == 200
    records = [body for kind, body in journal(rig.tmp_path) if kind == "mcp_tools"]
    assert len(records) == 2
    assert records[0]["digest"] == records[1]["digest"]
    assert [t["name"] for t in records[0]["tools"]] == ["search"]
    assert "tools" not in records[1], "an unchanged listing is recorded as its digest alone"

    metrics = httpx.get(f"{server.url}/metrics").text
    assert 'ankka_mcp_calls_total{outcome="ok",server="catalog",tool="search"} 2.0' in metrics
    assert 'ankka_mcp_connected{server="catalog"} 1.0' in metrics
    stop_cleanly(server)


def test_a_listing_recorded_by_another_process_is_not_recorded_again(rig: Rig) -> None:
    mcp, model, first = rig.open([{"text": "One."}, {"text": "Two."}])
    assert ask(first, "Hello").status_code == 200
    stop_cleanly(first)
    second = rig.shop(model.url, {"ANKKA_MCP_CATALOG_URL": mcp.url})  # same store, new process
    assert ask(second, "Hello again").status_code == 200
    records = [body for kind, body in journal(rig.tmp_path) if kind == "mcp_tools"]
    assert [("tools" in r) for r in records] == [True, False]
    assert records[0]["digest"] == records[1]["digest"]


def test_a_refused_result_reaches_neither_the_model_nor_the_journal(rig: Rig) -> None:
    _, model, server = rig.open(search("toaster", "I could not read that product."))
    answer = ask(server, "Is there a cheap toaster?")
    assert answer.status_code == 200, answer.text
    follow_up = json.dumps(received(model)[1]["body"]["messages"])
    assert "IGNORE PREVIOUS INSTRUCTIONS" not in follow_up
    assert "Budget toaster" not in follow_up
    assert "withheld" in follow_up and "no_instructions" in follow_up
    stored = journal_text(rig.tmp_path)
    assert "IGNORE PREVIOUS INSTRUCTIONS" not in stored and "Budget toaster" not in stored
    assert conversation(server)[2]["is_error"] is True
    metrics = httpx.get(f"{server.url}/metrics").text
    assert 'ankka_mcp_calls_total{outcome="refused",server="catalog",tool="search"} 1.0' in metrics


def test_a_tool_whose_description_is_refused_is_not_offered(rig: Rig) -> None:
    _, model, server = rig.open([{"text": "Hello."}], "--poisoned-tool")
    assert ask(server, "Hi").status_code == 200
    request = received(model)[0]
    assert offered_tools(request) == ["mcp__catalog__search"]
    assert "Ignore previous instructions" not in json.dumps(request["body"])
    metrics = httpx.get(f"{server.url}/metrics").text
    assert 'ankka_mcp_tools_left_out_total{server="catalog"} 1.0' in metrics
    output = server.stop()
    assert "tool 'supplier_notes' is left out" in output
    assert "description guardrail 'no_instructions'" in output


def test_a_restarted_server_is_re_initialised_and_the_next_call_succeeds(rig: Rig) -> None:
    # --handshake-only: the client holds a session, which the restart ends (404 to its id).
    first, _, server = rig.open([*search("mug"), *search("teapot")], "--handshake-only")
    port = port_of(first)
    assert ask(server, "A mug?").status_code == 200

    first.process.send_signal(signal.SIGKILL)
    first.process.wait()
    rig.catalog("--handshake-only", "--port", port)

    answer = ask(server, "A teapot?")
    assert answer.status_code == 200, answer.text
    result = conversation(server)[-2]
    assert result["is_error"] is False, result
    assert "Cast-iron teapot" in result["content"]
    metrics = httpx.get(f"{server.url}/metrics").text
    assert 'ankka_mcp_sessions_total{server="catalog"} 2.0' in metrics
    stop_cleanly(server)


@pytest.mark.parametrize("mode", ["negotiated", "handshake-only"])
def test_a_call_in_flight_when_the_server_dies_is_a_tool_error_not_a_hang(
    rig: Rig, mode: str
) -> None:
    flags = ("--handshake-only",) if mode == "handshake-only" else ()
    script = [*search("kettle", "The catalogue is down."), *search("mug")]
    slow, _, server = rig.open(script, "--delay", "30", *flags)
    port = port_of(slow)

    answers: list[httpx.Response] = []
    asking = threading.Thread(target=lambda: answers.append(ask(server, "A kettle?")))
    asking.start()
    eventually(
        lambda: "search 'kettle'" in "".join(slow.output),
        what="the call to reach the catalogue",
        timeout=30,
    )
    slow.process.send_signal(signal.SIGKILL)
    slow.process.wait()
    asking.join(timeout=45)
    assert not asking.is_alive(), "the turn hung on the dead server"
    assert answers[0].status_code == 200, answers[0].text
    broken = conversation(server)[2]
    assert broken["is_error"] is True
    assert "broke during tool 'search'" in broken["content"]

    rig.catalog("--port", port, *flags)
    wait_ready(server)
    assert ask(server, "A mug?").status_code == 200
    result = conversation(server)[-2]
    assert result["is_error"] is False and "Stoneware mug" in result["content"]
    stop_cleanly(server)


def test_an_unknown_mcp_variable_is_refused_at_start(tmp_path: Path) -> None:
    env = {
        **model_env("http://127.0.0.1:9"),
        "ANKKA_MCP_CATALOG_URL": "http://127.0.0.1:9/mcp",
        "ANKKA_MCP_CATALOG_HEADERS": "x",
    }
    done = subprocess.run(
        [
            *ankka_command("serve", "examples.shop:service", "--port", "0"),
            "--store",
            f"sqlite:///{tmp_path / 's.sqlite3'}",
        ],
        env={**_environ(), **env},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "ANKKA_MCP_CATALOG_HEADERS is not a setting" in done.stderr


def test_an_unreachable_server_is_named_by_readyz_fails_its_turns_fast_and_comes_back(
    rig: Rig,
) -> None:
    free = _free_port()
    url = f"http://127.0.0.1:{free}/mcp"
    model = rig.standin(search("kettle"))
    server = rig.shop(model.url, {"ANKKA_MCP_CATALOG_URL": url})
    ready = httpx.get(f"{server.url}/readyz")
    assert ready.status_code == 503
    assert "mcp server 'catalog'" in ready.json()["missing"]
    refused = ask(server, "Kettles?")
    assert refused.status_code == 503
    assert refused.json()["error"]["type"] == "mcp_server_unavailable"
    assert "MCP server 'catalog' is not available" in refused.json()["error"]["message"]
    assert received(model) == []  # failed before any model call

    rig.catalog("--port", str(free))
    wait_ready(server)
    assert ask(server, "Kettles now?").status_code == 200
    assert "mcp__catalog__search" in offered_tools(received(model)[0])
    assert "Steel kettle" in conversation(server)[-2]["content"]
    stop_cleanly(server)


def test_a_server_killed_mid_session_is_noticed_by_its_ping_and_its_turns_fail_fast(
    rig: Rig,
) -> None:
    mcp, model, server = rig.open(search("kettle"), ping_interval="1")
    assert ask(server, "Kettles?").status_code == 200
    assert httpx.get(f"{server.url}/readyz").status_code == 200

    mcp.process.send_signal(signal.SIGKILL)
    mcp.process.wait()
    # No turn is asked meanwhile: only the health watch can notice.
    down = eventually(
        lambda: httpx.get(f"{server.url}/readyz").json().get("missing"), what="readyz naming it"
    )
    assert "mcp server 'catalog'" in down
    metrics = httpx.get(f"{server.url}/metrics").text
    assert 'ankka_mcp_connected{server="catalog"} 0.0' in metrics
    refused = ask(server, "Mugs?")
    assert refused.status_code == 503
    assert refused.json()["error"]["type"] == "mcp_server_unavailable"
    assert "'catalog'" in refused.json()["error"]["message"]
    assert len(received(model)) == 2  # the first turn's two calls; none for the refused one
    assert "ConnectError" in down["mcp server 'catalog'"]  # its ping could not connect


def test_a_call_that_times_out_pings_at_once_and_a_frozen_server_is_noticed(rig: Rig) -> None:
    """Interval pings off: only the ping a timed-out call asks for can notice the server."""
    script = [*search("kettle", "The catalogue did not answer."), *search("mug")]
    mcp, model, server = rig.open(script, ping_interval="0", timeout="1")
    wait_ready(server)
    mcp.process.send_signal(signal.SIGSTOP)  # it takes connections and answers nothing
    try:
        assert ask(server, "Kettles?").status_code == 200
        # A tool error: its own timeout, or the session the failed ping ended under it.
        assert conversation(server)[2]["is_error"] is True
        down = eventually(
            lambda: httpx.get(f"{server.url}/readyz").json().get("missing"),
            what="readyz naming the frozen server",
        )
        assert "did not answer a ping within 1s" in down["mcp server 'catalog'"], down
        metrics = httpx.get(f"{server.url}/metrics").text
        assert 'ankka_mcp_connected{server="catalog"} 0.0' in metrics
    finally:
        mcp.process.send_signal(signal.SIGCONT)
    wait_ready(server)
    assert ask(server, "Mugs?").status_code == 200
    assert "Stoneware mug" in conversation(server)[-2]["content"]
    assert len(received(model)) == 4


def test_header_values_reach_the_server_and_nothing_else(rig: Rig) -> None:
    script = search("kettle")
    mcp, model, server = rig.open(
        script, "--token", CANARY, header_authorization=f"Bearer {CANARY}"
    )
    port = port_of(mcp)
    assert ask(server, "Kettles?").status_code == 200
    assert "Steel kettle" in conversation(server)[2]["content"], "the token was not sent"

    # Faults too: the server goes away and comes back refusing, so errors are logged.
    mcp.process.send_signal(signal.SIGKILL)
    mcp.process.wait()
    eventually(lambda: httpx.get(f"{server.url}/readyz").status_code == 503, what="503")
    refused = ask(server, "Mugs?")
    assert refused.status_code == 503, refused.text
    rig.catalog("--token", "another", "--port", port)
    eventually(
        lambda: "(HTTP 401)" in "".join(server.output), what="the refusing server's 401 logged"
    )

    seen = [
        httpx.get(f"{server.url}/metrics").text,
        httpx.get(f"{server.url}/readyz").text,
        json.dumps(conversation(server)),
        json.dumps(received(model)),
        journal_text(rig.tmp_path),
    ]
    output = server.stop()
    for text in [*seen, output]:
        assert CANARY not in text


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("ANKKA_MCP_", "ANKKA_MODEL_"))}


def test_a_tool_of_a_server_marked_requires_approval_waits_and_runs_once_approved(rig: Rig) -> None:
    _, model, server = rig.open(search("kettle", "Found kettles."), requires_approval="search")
    wait_ready(server)
    answer = ask(server, "Do you have kettles?")
    assert answer.status_code == 202, answer.text
    (request,) = answer.json()["approvals"]
    assert request["tool"] == "mcp__catalog__search"
    assert request["arguments"] == {"query": "kettle"}
    assert len(received(model)) == 1  # nothing ran; the model waits too
    decided = httpx.post(
        f"{server.url}/v1/approvals/{request['id']}",
        json={"decision": "approve", "digest": request["digest"]},
        timeout=60,
    )
    assert decided.status_code == 200, decided.text
    assert decided.json()["turn"]["reply"] == "Found kettles."
    tool_message = received(model)[1]["body"]["messages"][-1]
    assert "Steel kettle" in tool_message["content"]
    metrics = httpx.get(f"{server.url}/metrics").text
    assert 'ankka_mcp_calls_total{outcome="ok",server="catalog",tool="search"} 1.0' in metrics
    stop_cleanly(server)
