"""Hostile MCP servers against ``ankka serve`` (issue 31, items 10 and 11): a bad listing or a
bad result costs the model one tool, not the agent every turn; a server that hangs on
``tools/list`` does not hold turns; a listing that changes on every turn is journaled as its
changes; a huge result is cut off as it arrives.

The server is tests/support/hostile_mcp.py (the official SDK's server, with a middleware that
answers what the SDK would refuse to send); the agent is the shop (examples/shop.py) under
``ankka serve``, the stand-in its model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from ankka.runtime.features.mcp.bounded import MAX_ANSWER_BYTES
from ankka.runtime.records import registry as events
from ankka.runtime.records.mcp import McpToolsChanged, McpToolsRecord, listing_in
from tests.integration.conftest import received
from tests.integration.test_mcp import (
    Rig,
    ask,
    conversation,
    journal,
    offered_tools,
    rig,
    search,
    wait_ready,
)
from tests.support.processes import REPO, Server, start

pytestmark = pytest.mark.integration

__all__ = ["rig"]  # the fixture, from test_mcp

HOSTILE = REPO / "tests" / "support" / "hostile_mcp.py"


def open_hostile(rig: Rig, script: list[Any], *flags: str, **mcp_env: str) -> tuple[Server, Server]:
    """The hostile server with ``flags``, the stand-in on ``script`` and the shop; the shop
    once ready, and the stand-in."""
    mcp = rig._keep(start([sys.executable, str(HOSTILE), "--port", "0", *flags]))
    model = rig.standin(script)
    env = {f"ANKKA_MCP_CATALOG_{key.upper()}": value for key, value in mcp_env.items()}
    shop = rig.shop(model.url, {"ANKKA_MCP_CATALOG_URL": mcp.url, **env})
    wait_ready(shop)
    return shop, model


def calling(tool: str, answer: str = "Done.") -> list[dict[str, Any]]:
    return [{"tool_calls": [{"name": f"mcp__catalog__{tool}", "arguments": {}}]}, {"text": answer}]


def detail(shop: Server) -> dict[str, Any]:
    ready = httpx.get(f"{shop.url}/readyz")
    assert ready.status_code == 200, ready.text
    shown: dict[str, Any] = ready.json().get("detail", {}).get("mcp server 'catalog'", {})
    return shown


def left_out(shop: Server) -> float:
    for line in httpx.get(f"{shop.url}/metrics").text.splitlines():
        if line.startswith('ankka_mcp_tools_left_out_total{server="catalog"}'):
            return float(line.split()[-1])
    return 0.0


def test_a_tool_listed_twice_is_left_out_and_every_turn_still_answers(rig: Rig) -> None:
    shop, model = open_hostile(rig, [{"text": "Hello."}, {"text": "Again."}], "--duplicate")
    for message in ("Hi", "Hi again"):
        answer = ask(shop, message)
        assert answer.status_code == 200, answer.text
    assert "mcp__catalog__search" not in offered_tools(received(model)[0])
    assert "2 tools of this name" in detail(shop)["left_out"]["'search'"]
    assert left_out(shop) == 1.0  # counted once per listing, not once per turn
    assert "tool 'search' is left out" in shop.stop()


def test_a_tool_whose_schema_the_sdk_refuses_is_left_out_and_the_rest_work(rig: Rig) -> None:
    shop, model = open_hostile(rig, search("kettle", "Two kettles."), "--bad-schema")
    answer = ask(shop, "Kettles?")
    assert answer.status_code == 200, answer.text
    assert answer.json()["reply"] == "Two kettles."
    assert offered_tools(received(model)[0]) == ["mcp__catalog__search"]
    assert "Steel kettle" in conversation(shop)[2]["content"]
    assert "the protocol's schema refuses it" in detail(shop)["left_out"]["'broken'"]
    assert left_out(shop) == 1.0


def test_a_result_of_the_wrong_shape_is_a_tool_error_the_model_sees(rig: Rig) -> None:
    script = [*calling("shapeless", "That tool is broken."), *search("mug", "A mug.")]
    shop, model = open_hostile(rig, script, "--bad-result")
    answer = ask(shop, "Use it")
    assert answer.status_code == 200, answer.text
    result = conversation(shop)[2]
    assert result["is_error"] is True
    assert (
        "answered tool 'shapeless' with a result that does not fit the protocol"
        in (result["content"])
    )
    assert received(model)[1]["body"]["messages"][-1]["content"] == result["content"]
    assert ask(shop, "A mug?").status_code == 200  # the session and the server are fine
    assert "Stoneware mug" in conversation(shop)[-2]["content"]


def test_a_tools_list_that_hangs_does_not_hold_turns(rig: Rig, tmp_path: Path) -> None:
    hang = tmp_path / "hang"
    script = [*search("kettle"), *search("mug")]
    # A timeout of ten minutes: a turn that waited for the listing would outlast ask()'s 60 s.
    shop, model = open_hostile(rig, script, "--hang-list-while", str(hang), timeout="600")
    assert ask(shop, "Kettles?").status_code == 200
    hang.touch()
    answer = ask(shop, "Mugs?")
    assert answer.status_code == 200, answer.text
    assert "mcp__catalog__search" in offered_tools(received(model)[2])  # the last good listing
    assert "Stoneware mug" in conversation(shop)[-2]["content"]
    assert "the last good listing is served" in detail(shop)["listing"]
    hang.unlink()


def test_a_listing_that_changes_every_turn_is_journaled_as_its_changes(rig: Rig) -> None:
    turns = 4
    shop, _ = open_hostile(rig, [{"text": f"Turn {n}."} for n in range(turns)], "--changing", "150")
    for n in range(turns):
        assert ask(shop, f"Turn {n}").status_code == 200
    stored = [(k, b) for k, b in journal(rig.tmp_path) if k.startswith("mcp_tools")]
    assert len(stored) == turns
    sizes = [len(json.dumps(body)) for _, body in stored]
    assert stored[0][0] == "mcp_tools" and sizes[0] > 100_000, "the first listing, whole"
    for kind, body in stored[1:]:
        assert kind == "mcp_tools_changed" or "tools" not in body, (kind, len(json.dumps(body)))
    assert any(kind == "mcp_tools_changed" for kind, _ in stored), "the clock tool changed"
    assert max(sizes[1:]) < 10_000, sizes
    records = [events.decode(kind, json.dumps(body)) for kind, body in stored]
    last = records[-1]
    assert isinstance(last, McpToolsRecord | McpToolsChanged)
    rebuilt = listing_in(records, "catalog", last.digest)
    assert rebuilt is not None and len(rebuilt.tools) == 152  # search, clock and the fillers


def _peak_rss(server: Server) -> int:
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


@pytest.mark.parametrize("answers", ["json", "event-stream"])
def test_a_huge_result_is_cut_off_as_it_arrives(rig: Rig, answers: str) -> None:
    flags = ["--huge-result", "100"]
    flags += ["--json-response"] if answers == "json" else ["--handshake-only"]
    shop, _ = open_hostile(rig, calling("dump", "Too big."), *flags)
    before = _peak_rss(shop)
    answer = ask(shop, "Dump it")
    assert answer.status_code == 200, answer.text
    result = conversation(shop)[2]
    assert result["is_error"] is True
    assert f"with more than {MAX_ANSWER_BYTES} bytes; the answer was not read" in result["content"]
    grown = _peak_rss(shop) - before
    # Read whole, 100 MB took the runtime past 1 GB; cut off at 16 MiB it stays near that.
    assert grown < 200 * 1024 * 1024, f"the runtime's peak grew by {grown / 2**20:.0f} MiB"
    assert "Traceback" not in "".join(shop.output)
