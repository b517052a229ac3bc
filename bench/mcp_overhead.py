"""What an MCP tool call costs through ankka against the same call on the SDK's own client.

ankka calls MCP servers with the official SDK's client, and around each call checks the
arguments against the tool's JSON Schema, maps the result, replaces header values, runs the
result guardrails and counts the call. This measures what that layer costs per call: the
catalogue (``examples/mcp_catalog.py``) as a process on loopback, one ``search`` call made by
ankka's tool (as a turn runs it: ``McpTool.run`` with the model's argument text, the shop's
result guardrail on) and by ``mcp.Client.call_tool`` on a session of its own, alternating call
by call in the same run so both see the same machine.

Printed: p50 and p90 wall time per call and ankka's ratio to the SDK at p50. The goal: at most
1.10 at p50.

Run: ``python bench/mcp_overhead.py`` (``--calls N``, ``--warmup N``). Needs the ``mcp`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp import Client

from ankka.runtime.features.mcp.config import McpServerSettings
from ankka.runtime.features.mcp.servers import McpServers
from examples.shop import no_instructions
from tests.support.processes import REPO, started

QUERY = {"query": "kettle"}
RAW_QUERY = '{"query": "kettle"}'


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(url: str, calls: int, warmup: int) -> tuple[list[float], list[float]]:
    settings = McpServerSettings("catalog", url)
    async with Client(url) as direct, McpServers({"catalog": settings}) as servers:
        listed = await servers.tools_for(
            ["catalog"],
            agent="bench",
            turn="t",
            result_guardrails=[no_instructions],
        )
        (tool,) = listed.tools

        async def through_ankka() -> None:
            outcome = await tool.run(RAW_QUERY)
            assert not outcome.is_error, outcome.content

        async def through_sdk() -> None:
            result = await direct.call_tool("search", QUERY)
            assert not result.is_error

        async def timed(call: Callable[[], Awaitable[None]]) -> float:
            started_at = time.perf_counter()
            await call()
            return time.perf_counter() - started_at

        for _ in range(warmup):
            await through_ankka()
            await through_sdk()
        ankka: list[float] = []
        sdk: list[float] = []
        for i in range(calls):
            # Alternate which goes first, so neither always meets a warm or a cold socket.
            pair = (through_ankka, through_sdk) if i % 2 == 0 else (through_sdk, through_ankka)
            for call in pair:
                (ankka if call is through_ankka else sdk).append(await timed(call))
        return ankka, sdk


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=40)
    args = parser.parse_args()
    command = [sys.executable, str(REPO / "examples" / "mcp_catalog.py"), "--port", "0"]
    with started(command) as catalog:
        ankka, sdk = asyncio.run(measure(catalog.url, args.calls, args.warmup))
    load = os.getloadavg()[0]
    print(f"MCP tool call, {args.calls} calls each after {args.warmup} warm-up; load {load:.2f}")
    print(f"{'':<22}{'p50 ms':>10}{'p90 ms':>10}")
    for name, values in (("SDK client directly", sdk), ("through ankka", ankka)):
        p50, p90 = percentile(values, 0.5) * 1000, percentile(values, 0.9) * 1000
        print(f"{name:<22}{p50:>10.3f}{p90:>10.3f}")
    ratio = statistics.median(ankka) / statistics.median(sdk)
    print(f"ratio at p50: {ratio:.3f} (goal: at most 1.10)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
