"""A hostile MCP server, built with the official SDK's server side, for the hardening tests.

    python tests/support/hostile_mcp.py --port 0 [--duplicate] [--bad-schema] [--bad-result]
        [--hang-list-while PATH] [--changing N] [--huge-result MB] [--json-response]
        [--handshake-only]

It serves the catalogue's ``search(query)`` (examples/mcp_catalog.py) and, by flag, what a
careless or hostile server does to its clients:

- ``--duplicate``: lists ``search`` twice, the second with another description;
- ``--bad-schema``: also lists ``broken``, whose input schema is ``{"type": "string"}`` (the
  SDK's client refuses the whole listing for it);
- ``--bad-result``: also serves ``shapeless()``, whose call result is not a ``CallToolResult``
  (``content`` is a string);
- ``--hang-list-while PATH``: a ``tools/list`` asked while PATH exists is never answered;
- ``--changing N``: also lists N tools with large schemas and ``clock``, whose description
  changes with every listing (a listing that is new on every turn);
- ``--huge-result MB``: also serves ``dump()``, which answers MB megabytes of text;
- ``--json-response``: answers requests with JSON bodies rather than event streams;
- ``--handshake-only``: speaks only the initialize-handshake protocol, as the catalogue's
  flag of that name (its answers are event streams unless ``--json-response``).

The results the SDK would refuse to send are written by a server middleware, which the SDK
trusts with what it returns (that is the hostility). Prints ``hostile mcp: listening on
http://HOST:PORT/mcp``; each ``tools/list`` it answers is printed as ``hostile mcp: listed N``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ankka._kernel.serve import bind
from examples.mcp_catalog import build as catalog


class Hostile:
    """The server middleware that rewrites what the SDK's handlers answered."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.listings = 0

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "tools/list":
            return await self._listing(ctx, call_next)
        params = ctx.params or {}
        if ctx.method == "tools/call" and params.get("name") == "shapeless":
            answered = _as_dict(await call_next(ctx))
            return {**answered, "content": "this is not a list of content blocks"}
        return await call_next(ctx)

    async def _listing(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        hang = self.args.hang_list_while
        if hang is not None and await asyncio.to_thread(os.path.exists, hang):
            await asyncio.Event().wait()  # never answers
        answered = _as_dict(await call_next(ctx))
        tools: list[dict[str, Any]] = list(answered.get("tools", []))
        self.listings += 1
        if self.args.duplicate:
            second = dict(next(t for t in tools if t["name"] == "search"))
            second["description"] = "A second search, which does something else."
            tools.append(second)
        if self.args.bad_schema:
            tools.append({"name": "broken", "inputSchema": {"type": "string"}})
        for tool in tools:
            if tool["name"] == "clock":
                tool["description"] = f"Listing number {self.listings}."
        print(f"hostile mcp: listed {self.listings}", flush=True)
        return {**answered, "tools": tools}


def _as_dict(result: HandlerResult) -> dict[str, Any]:
    if isinstance(result, dict):
        return result
    assert result is not None
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


def build(args: argparse.Namespace) -> MCPServer:
    server = catalog(handshake_only=args.handshake_only)
    if args.bad_result:

        @server.tool()
        def shapeless() -> str:
            """Answers a result of the wrong shape."""
            return "fine"

    if args.huge_result:
        size = int(args.huge_result * 1024 * 1024)

        @server.tool()
        def dump() -> str:
            """Answers a very large text."""
            print(f"hostile mcp: dumping {size} bytes", flush=True)
            return "x" * size

    if args.changing:

        @server.tool()
        def clock() -> str:
            """Listing number 0."""
            return "tick"

        for number in range(args.changing):
            server.add_tool(
                _filler(number),
                name=f"filler_{number:03d}",
                description=f"Filler tool {number}: " + "a long description. " * 40,
            )
    server.middleware.insert(0, Hostile(args))
    return server


def _filler(number: int) -> Any:
    def filler(
        alpha: str = "",
        beta: str = "",
        gamma: str = "",
        delta: int = 0,
        epsilon: float = 0.0,
        zeta: bool = False,
    ) -> str:
        return f"filler {number}"

    return filler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--duplicate", action="store_true")
    parser.add_argument("--bad-schema", action="store_true")
    parser.add_argument("--bad-result", action="store_true")
    parser.add_argument("--hang-list-while", metavar="PATH")
    parser.add_argument("--changing", type=int, default=0, metavar="N")
    parser.add_argument("--huge-result", type=float, default=0.0, metavar="MB")
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--handshake-only", action="store_true")
    args = parser.parse_args(argv)
    app = build(args).streamable_http_app(json_response=args.json_response)
    sock = bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5)
    print(f"hostile mcp: listening on http://{host}:{port}/mcp", flush=True)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
