"""A 2026-07-28 result without ``resultType`` is a complete one (Result.resultType, SEP-2322):
the official SDK's client and server, in process, with a server middleware that leaves the
field out of what its tool answers."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from pydantic import ValidationError

from ankka.runtime.features.mcp.result_type import absent_means_complete


def _server() -> MCPServer:
    server = MCPServer("untagged")

    @server.tool()
    def untagged() -> str:
        """Answers without resultType."""
        return "plain answer"

    @server.tool()
    def tagged() -> str:
        """Answers as the SDK does."""
        return "tagged answer"

    async def leave_out(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        answered = await call_next(ctx)
        if ctx.method != "tools/call" or (ctx.params or {}).get("name") != "untagged":
            return answered
        assert answered is not None
        result: dict[str, Any] = (
            answered
            if isinstance(answered, dict)
            else answered.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
        return {k: v for k, v in result.items() if k != "resultType"}

    server.middleware.insert(0, leave_out)
    return server


async def test_a_result_without_result_type_is_read_as_complete() -> None:
    async with Client(_server()) as client:
        assert client.protocol_version == "2026-07-28"
        absent_means_complete(client)
        absent_means_complete(client)  # once is enough; twice changes nothing
        result = await client.call_tool("untagged", {})
        assert result.result_type == "complete"
        assert [block.text for block in result.content if block.type == "text"] == ["plain answer"]
        tagged = await client.call_tool("tagged", {})
        assert [block.text for block in tagged.content if block.type == "text"] == ["tagged answer"]


async def test_without_it_the_sdk_refuses_such_a_result() -> None:
    async with Client(_server()) as client:
        with pytest.raises(ValidationError, match="resultType"):
            await client.call_tool("untagged", {})
