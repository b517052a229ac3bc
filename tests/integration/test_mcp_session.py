"""McpServers in this process against the catalogue as a process: sessions, calls, shutdown.

The pending-task check (tests/support/pending_tasks.py) fails any of these that leaves a
task behind, so entering and leaving McpServers owning every task it starts is tested too.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from ankka.runtime.features.mcp.config import McpServerSettings
from ankka.runtime.features.mcp.servers import McpServers, McpServerUnavailable
from ankka.runtime.records.mcp import McpToolsRecord
from tests.support.processes import REPO, Server, started

pytestmark = pytest.mark.integration


@pytest.fixture
def catalog() -> Iterator[Server]:
    command = [sys.executable, str(REPO / "examples" / "mcp_catalog.py"), "--port", "0"]
    with started(command) as server:
        yield server


async def test_a_session_lists_calls_and_ends_without_a_teardown_error(
    catalog: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with McpServers({"catalog": McpServerSettings("catalog", catalog.url)}) as servers:
        assert servers.missing() == {}
        listed = await servers.tools_for(["catalog"], agent="a", turn="t1")
        (tool,) = listed.tools
        assert tool.name == "mcp__catalog__search"
        first = listed.records[0]
        assert isinstance(first, McpToolsRecord) and first.tools is not None
        outcome = await tool.run('{"query": "teapot"}')
        assert not outcome.is_error and "Cast-iron teapot" in outcome.content
        calls = await asyncio.gather(*(tool.run('{"query": "mug"}') for _ in range(5)))
        assert all("Stoneware mug" in c.content for c in calls)
        again = await servers.tools_for(
            ["catalog"], agent="a", turn="t2", recorded={"catalog": listed.records[0].digest}
        )
        assert again.records[0] == McpToolsRecord("a", "t2", "catalog", first.digest)
    problems = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert problems == []
    assert "cancel scope" not in caplog.text


async def test_bad_arguments_are_an_error_result_and_nothing_is_sent(catalog: Server) -> None:
    registry = CollectorRegistry()
    settings = {"catalog": McpServerSettings("catalog", catalog.url)}
    async with McpServers(settings, registry=registry) as servers:
        (tool,) = (await servers.tools_for(["catalog"], agent="a", turn="t")).tools
        outcome = await tool.run('{"query": 5}')
        assert outcome.is_error
        assert "do not fit its schema" in outcome.content and "query" in outcome.content
    labels = {"server": "catalog", "tool": "search"}
    assert registry.get_sample_value("ankka_mcp_calls_total", {**labels, "outcome": "invalid"}) == 1
    assert registry.get_sample_value("ankka_mcp_call_seconds_count", labels) is None


async def test_a_server_down_at_start_is_missing_and_leaving_does_not_wait_for_it() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = McpServerSettings("catalog", f"http://127.0.0.1:{port}/mcp")
    async with asyncio.timeout(30):  # a bound against a hang, not a speed test
        async with McpServers({"catalog": settings}, start_wait=5) as servers:
            missing = servers.missing()
            assert list(missing) == ["catalog"]
            assert "ConnectError" in missing["catalog"]
            with pytest.raises(McpServerUnavailable, match="MCP server 'catalog' is not"):
                await servers.tools_for(["catalog"], agent="a", turn="t")


async def test_leaving_does_not_wait_for_a_server_that_never_answers_the_handshake() -> None:
    # A listener that accepts and never answers: the handshake hangs until it is cancelled.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        async with asyncio.timeout(30):  # a bound against a hang, not a speed test
            async with McpServers(
                {"catalog": McpServerSettings("catalog", url)}, start_wait=1
            ) as servers:
                assert list(servers.missing()) == ["catalog"]
    finally:
        silent.close()


async def test_a_servers_sampling_request_is_refused_with_an_mcp_error() -> None:
    # On a handshake session the server can ask (from 2026-07-28 on it has no channel to).
    command = [sys.executable, str(REPO / "examples" / "mcp_catalog.py"), "--port", "0"]
    with started([*command, "--sampling-tool", "--handshake-only"]) as server:
        settings = {"catalog": McpServerSettings("catalog", server.url)}
        async with McpServers(settings) as servers:
            listed = await servers.tools_for(["catalog"], agent="a", turn="t")
            (describe,) = [t for t in listed.tools if t.tool == "describe"]
            outcome = await describe.run('{"product": "kettle"}')
    assert "the client refused sampling" in outcome.content, outcome.content
    assert "Sampling not supported" in outcome.content
    assert "the client's model wrote" not in outcome.content
