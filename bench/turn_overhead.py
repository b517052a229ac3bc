"""How much time the platform itself spends per turn: ankka against openai-agents and pydantic-ai.

One run, one stand-in model server on loopback, the same agent on each framework: one tool
(``get_weather``), one tool round per turn (two model calls). Three shapes:

- fresh:   every turn in a new session;
- growing: one session growing to --turns turns (four messages a turn);
- 32 at once: --sessions sessions, each taking --concurrent-turns turns, all at the same time.

Every model call goes through an HTTP transport that times it; a turn's *own time* is its wall
time minus the time its model calls spent on the wire and in the stand-in. Printed: p50/p99
own time per turn, turns per second (wall clock, model time included), and ankka's ratio.

ankka commits every turn to SQLite (WAL, synchronous=FULL) before the turn returns;
openai-agents uses its SQLiteSession; pydantic-ai carries the history in memory (it has no
session store of its own), so it writes nothing.

Run: ``python bench/turn_overhead.py`` (``make bench`` installs the peers, extra ``bench``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.processes import ankka_command, started

INSTRUCTIONS = "You answer questions about the weather. Use get_weather, then answer briefly."
QUESTION = "What is the weather in Helsinki?"


def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"{city}: -3 °C, light snow"


_wire_time: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "wire", default=None
)


class TimedTransport(httpx2.AsyncHTTPTransport):
    """Adds each request's time on the wire (to the last byte) to the current turn's total."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        started_at = time.perf_counter()
        response = await super().handle_async_request(request)
        await response.aread()
        spent = _wire_time.get()
        if spent is not None:
            spent[0] += time.perf_counter() - started_at
        return response


def timed_client() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=TimedTransport(), timeout=60)


Turn = Callable[[str, str], Awaitable[None]]  # (session, message)


@dataclass
class Shape:
    name: str
    sessions: int
    turns_per_session: int


@dataclass
class Result:
    framework: str
    shape: str
    own_ms: list[float]
    wall_s: float
    turns: int

    @property
    def p50(self) -> float:
        return statistics.median(self.own_ms)

    @property
    def p99(self) -> float:
        ordered = sorted(self.own_ms)
        return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]

    @property
    def rate(self) -> float:
        return self.turns / self.wall_s


async def measure(framework: str, shape: Shape, turn: Turn) -> Result:
    own: list[float] = []

    async def one(session: str, index: int) -> None:
        spent = [0.0]
        token = _wire_time.set(spent)
        began = time.perf_counter()
        try:
            await turn(session, f"{QUESTION} ({index})")
        finally:
            _wire_time.reset(token)
        own.append((time.perf_counter() - began - spent[0]) * 1000)

    async def session_run(number: int) -> None:
        for index in range(shape.turns_per_session):
            await one(f"{shape.name}-{number}", index)

    began = time.perf_counter()
    if shape.name == "fresh":
        for index in range(shape.turns_per_session):
            await one(f"fresh-{index}", index)
    else:
        await asyncio.gather(*(session_run(n) for n in range(shape.sessions)))
    wall = time.perf_counter() - began
    return Result(framework, shape.name, own, wall, len(own))


# The three frameworks --------------------------------------------------------------------


async def ankka_turn(base_url: str, workdir: Path) -> tuple[Turn, Callable[[], Awaitable[None]]]:
    from ankka.runtime.agents import Service
    from ankka.runtime.agents import Turn as Effect
    from ankka.runtime.host import Runtime
    from ankka.runtime.journal.sqlite import SqliteStore
    from ankka.runtime.providers.chat_completions import ChatCompletionsProvider
    from ankka.runtime.tools import tool

    service = Service("bench")
    weather_tool = tool(get_weather)

    @service.agent("weather")
    def weather(request: Any) -> Effect:
        return Effect(message=request.message, instructions=INSTRUCTIONS, tools=[weather_tool])

    store = await SqliteStore.open(workdir / f"ankka-{time.monotonic_ns()}.sqlite3")
    provider = ChatCompletionsProvider(
        name="default", model="standin", base_url=f"{base_url}/v1", http_client=timed_client()
    )
    runtime = Runtime(service, store=store, providers={"default": provider})

    async def turn(session: str, message: str) -> None:
        await runtime.run(runtime.plan("weather", session, message))

    return turn, runtime.aclose


async def openai_agents_turn(
    base_url: str, workdir: Path
) -> tuple[Turn, Callable[[], Awaitable[None]]]:
    import openai
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        SQLiteSession,
        function_tool,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)
    client = openai.AsyncOpenAI(
        base_url=f"{base_url}/v1", api_key="none", http_client=timed_client()
    )
    agent = Agent(
        name="weather",
        instructions=INSTRUCTIONS,
        tools=[function_tool(get_weather)],
        model=OpenAIChatCompletionsModel(model="standin", openai_client=client),
    )
    db = workdir / f"agents-{time.monotonic_ns()}.sqlite3"
    sessions: dict[str, Any] = {}

    async def turn(session: str, message: str) -> None:
        if session not in sessions:
            sessions[session] = SQLiteSession(session, str(db))
        await Runner.run(agent, message, session=sessions[session])

    async def close() -> None:
        await client.close()

    return turn, close


async def pydantic_ai_turn(
    base_url: str, workdir: Path
) -> tuple[Turn, Callable[[], Awaitable[None]]]:
    import openai
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = openai.AsyncOpenAI(
        base_url=f"{base_url}/v1", api_key="none", http_client=timed_client()
    )
    model = OpenAIChatModel("standin", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, instructions=INSTRUCTIONS, tools=[get_weather])
    histories: dict[str, list[Any]] = {}

    async def turn(session: str, message: str) -> None:
        result = await agent.run(message, message_history=histories.get(session))
        histories[session] = result.all_messages()

    async def close() -> None:
        await client.close()

    return turn, close


FRAMEWORKS = {
    "ankka": ankka_turn,
    "openai-agents": openai_agents_turn,
    "pydantic-ai": pydantic_ai_turn,
}


def script(turns: int) -> list[dict[str, Any]]:
    call = {
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Helsinki"}}],
        "usage": {"input_tokens": 100, "output_tokens": 10},
        "when": "user",
    }
    answer = {
        "text": "It is -3 °C with light snow.",
        "usage": {"input_tokens": 120, "output_tokens": 12},
        "when": "tool",
    }
    return [call, answer] * turns


async def run(args: argparse.Namespace) -> list[Result]:
    shapes = [
        Shape("fresh", 1, args.turns),
        Shape("growing", 1, args.turns),
        Shape("concurrent", args.sessions, args.concurrent_turns),
    ]
    results: list[Result] = []
    empty = Path(tempfile.mkdtemp()) / "empty.json"
    empty.write_text("[]")
    with (
        tempfile.TemporaryDirectory() as workdir,
        started(ankka_command("standin", "--script", str(empty), "--port", "0")) as standin,
    ):
        for shape in shapes:
            for name in args.frameworks:
                total = shape.sessions * shape.turns_per_session
                # one more turn to warm up (imports, connection pool) before measuring
                async with httpx.AsyncClient() as control:
                    await control.put(
                        f"{standin.url}/_standin/script", content=json.dumps(script(total + 1))
                    )
                turn, close = await FRAMEWORKS[name](standin.url, Path(workdir))
                try:
                    await turn(f"warm-up-{name}-{shape.name}", QUESTION)
                    result = await measure(name, shape, turn)
                finally:
                    await close()
                results.append(result)
                print(
                    f"  {name:<14} {shape.name:<11} p50 {result.p50:7.2f} ms  "
                    f"p99 {result.p99:7.2f} ms  {result.rate:7.1f} turns/s",
                    file=sys.stderr,
                    flush=True,
                )
    return results


def report(results: list[Result]) -> str:
    lines = [
        "| shape | framework | own time p50 (ms) | own time p99 (ms) | turns/s "
        "| ankka ÷ this (turns/s) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    by_shape: dict[str, dict[str, Result]] = {}
    for r in results:
        by_shape.setdefault(r.shape, {})[r.framework] = r
    for shape, frameworks in by_shape.items():
        ours = frameworks.get("ankka")
        for name, r in frameworks.items():
            ratio = f"{ours.rate / r.rate:.2f}×" if ours and name != "ankka" else ""
            lines.append(
                f"| {shape} | {name} | {r.p50:.2f} | {r.p99:.2f} | {r.rate:.1f} | {ratio} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=200, help="turns for fresh and growing")
    parser.add_argument("--sessions", type=int, default=32, help="sessions at once")
    parser.add_argument("--concurrent-turns", type=int, default=10, help="turns per session")
    parser.add_argument(
        "--frameworks", nargs="+", default=list(FRAMEWORKS), choices=list(FRAMEWORKS)
    )
    args = parser.parse_args()
    print(report(asyncio.run(run(args))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
