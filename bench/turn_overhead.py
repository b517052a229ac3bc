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
``--wire responses`` or ``--wire anthropic`` has ankka speak that wire to the stand-in (its
provider for OpenAI's own API, or Anthropic's); the peers always speak Chat Completions.

The event loop: ``--loop asyncio`` (the default: asyncio's own loop, as every earlier figure
here) or ``--loop uvloop`` (what ``ankka serve`` runs on, ``ankka._kernel.serve.run``). The
whole bench process runs on the loop chosen, so every framework measured gets the same one.

Before and after: ``--baseline DIR`` measures ankka only, from DIR's checkout (the "before")
and from this one (the "after"), each in a process of its own, alternated for ``--rounds``
rounds (the order flips every round), and prints each shape's figures side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2

# --baseline runs this file against another checkout's ankka: ANKKA_FROM names it.
sys.path.insert(0, os.environ.get("ANKKA_FROM") or str(Path(__file__).resolve().parents[1]))

from tests.support.processes import ankka_command, started

ROOT = Path(__file__).resolve().parents[1]

INSTRUCTIONS = "You answer questions about the weather. Use get_weather, then answer briefly."
QUESTION = "What is the weather in Helsinki?"


def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"{city}: -3 °C, light snow"


_wire_time: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "wire", default=None
)


class TimedTransport(httpx2.AsyncBaseTransport):
    """Adds each request's time on the wire (to the last byte) to the current turn's total,
    around the transport the framework uses (httpx2's own, or ankka's lean one)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self._inner = inner or httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        started_at = time.perf_counter()
        response = await self._inner.handle_async_request(request)
        await response.aread()
        spent = _wire_time.get()
        if spent is not None:
            spent[0] += time.perf_counter() - started_at
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def timed_client(inner: httpx2.AsyncBaseTransport | None = None) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=TimedTransport(inner), timeout=60)


def ankka_transport() -> httpx2.AsyncBaseTransport | None:
    """The transport ankka's providers use by default: its lean one where the checkout has it
    (issue 11), else httpx2's (an older checkout measured as the baseline)."""
    try:
        from ankka.runtime.providers.lean_http import LeanTransport
    except ImportError:
        return None
    return LeanTransport()


def ankka_client() -> httpx2.AsyncClient:
    """The HTTP client ankka's providers use by default, over the timed transport: its
    ``lean_client`` where the checkout's takes a transport (``LeanClient``, issue 11), else
    httpx2's own client over the checkout's transport (as those checkouts' providers built)."""
    timed = TimedTransport(ankka_transport())
    try:
        from ankka.runtime.providers.lean_http import LeanClient
    except ImportError:
        return httpx2.AsyncClient(transport=timed, timeout=60, follow_redirects=True)
    return LeanClient(transport=timed, timeout=httpx2.Timeout(60))


Turn = Callable[[str, str], Awaitable[None]]  # (session, message)


@dataclass
class Shape:
    name: str
    sessions: int
    turns_per_session: int


# ------------------------------------------------------------------ measuring, interleaved


@dataclass
class Slice:
    """A run of consecutive turns of one framework: their own times, wall and CPU time."""

    first: int  # the index of its first turn within the shape (0-based)
    own_ms: list[float]
    wall_s: float
    cpu_s: float


@dataclass
class Result:
    framework: str
    shape: str
    slices: list[Slice] = field(default_factory=list)

    def window(self, first: int, last: int) -> Result:
        """The slices whose first turn falls in [first, last) (a part of a growing session)."""
        chosen = [s for s in self.slices if first <= s.first < last]
        return Result(self.framework, self.shape, chosen)

    @property
    def own_ms(self) -> list[float]:
        return [x for s in self.slices for x in s.own_ms]

    @property
    def turns(self) -> int:
        return len(self.own_ms)

    @property
    def p50(self) -> float:
        return statistics.median(self.own_ms)

    @property
    def p99(self) -> float:
        ordered = sorted(self.own_ms)
        return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]

    @property
    def rate(self) -> float:
        return self.turns / sum(s.wall_s for s in self.slices)

    @property
    def cpu_ms(self) -> float:
        """This process's CPU time (every thread) per turn: the framework's own work, the
        HTTP client's included; the stand-in runs in another process."""
        return sum(s.cpu_s for s in self.slices) * 1000 / self.turns


async def timed_turn(turn: Turn, session: str, message: str, own: list[float]) -> None:
    spent = [0.0]
    token = _wire_time.set(spent)
    began = time.perf_counter()
    try:
        await turn(session, message)
    finally:
        _wire_time.reset(token)
    own.append((time.perf_counter() - began - spent[0]) * 1000)


async def run_slice(shape: Shape, turn: Turn, first: int, count: int) -> Slice:
    """``count`` turns of the shape starting at turn ``first`` (per session, for concurrent)."""
    own: list[float] = []
    cpu, began = time.process_time(), time.perf_counter()
    if shape.name == "fresh":
        for index in range(first, first + count):
            await timed_turn(turn, f"fresh-{index}", f"{QUESTION} ({index})", own)
    elif shape.name == "growing":
        for index in range(first, first + count):
            await timed_turn(turn, "growing", f"{QUESTION} ({index})", own)
    else:
        for index in range(first, first + count):  # every session one turn, all at once
            await asyncio.gather(
                *(
                    timed_turn(turn, f"concurrent-{n}", f"{QUESTION} ({index})", own)
                    for n in range(shape.sessions)
                )
            )
    return Slice(first, own, time.perf_counter() - began, time.process_time() - cpu)


# The frameworks --------------------------------------------------------------------------


def ankka_provider(wire: str, base_url: str) -> Any:
    """ankka's provider for ``wire`` against the stand-in, every call through the timed
    transport. Responses and Anthropic take no HTTP client in an older checkout, so theirs is
    set after construction (the same client either way)."""
    from ankka.runtime.providers.chat_completions import ChatCompletionsProvider

    client = ankka_client()
    if wire == "chat":
        return ChatCompletionsProvider(
            name="default", model="standin", base_url=f"{base_url}/v1", http_client=client
        )
    if wire == "responses":
        from ankka.runtime.providers.openai_transport import OpenAITransport
        from ankka.runtime.providers.responses import ResponsesProvider

        url = f"{base_url}/v1"
        provider: Any = ResponsesProvider(
            name="default", model="standin", api_key="k", base_url=url
        )
        provider._transport = OpenAITransport(
            provider="default",
            base_url=url,
            api_key="k",
            timeout=120,
            max_retries=2,
            http_client=client,
        )
        return provider
    import anthropic

    from ankka.runtime.providers.anthropic import AnthropicProvider

    provider = AnthropicProvider(name="default", model="standin", api_key="k", base_url=base_url)
    provider._client = anthropic.AsyncAnthropic(
        api_key="k", base_url=base_url, max_retries=2, http_client=client
    )
    return provider


class _Dropping:
    """A span exporter that drops every batch: tracing on, nothing sent (the "no-op exporter"
    of issue 28's figure)."""

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_TRACERS: dict[str, Any] = {}  # tracing mode -> its TracerProvider, made once per process


def engine_spans(mode: str) -> Any:
    """The engine's spans for ``mode`` (``noop``: spans made and batched, then dropped;
    ``otlp``: exported to the Jaeger in ``ANKKA_BENCH_OTLP``), as ``ankka serve`` makes them:
    the batch processor, and the providers sending ``traceparent``."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from ankka._kernel import tracing
    from ankka.runtime.engine.spans import EngineSpans

    provider = _TRACERS.get(mode)
    if provider is None:
        if mode == "noop":
            exporter: Any = _Dropping()
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            endpoint = os.environ["ANKKA_BENCH_OTLP"]
            exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")
        provider = _TRACERS[mode] = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        tracing._on = True  # as from_environment sets it: the providers send traceparent
    return EngineSpans(provider.get_tracer("ankka", schema_url=tracing.SCHEMA_URL))


async def _ankka_runtime(
    service: Any, path: Path, providers: dict[str, Any], spans: Any = None
) -> Any:
    """A runtime on a new SQLite file, built as this checkout builds one, or as a checkout
    from before the one Store, or from before the rooms and the one engine did
    (``--baseline`` runs this file there)."""
    try:
        from ankka.runtime.drivers.context import Context
        from ankka.runtime.drivers.request import Runtime
    except ImportError:
        from ankka.runtime.host import Runtime  # type: ignore[import-not-found,no-redef]
        from ankka.runtime.journal.sqlite import (  # type: ignore[import-not-found]
            SqliteStore,
        )

        old: Any = Runtime
        return old(service, store=await SqliteStore.open(path), providers=providers)
    try:
        from tests.support.stores import journal_store  # the runtime's aclose closes it
    except ImportError:  # a checkout from before the one Store
        import importlib

        sqlite: Any = importlib.import_module("ankka.runtime.store.sqlite")
        journal_store = sqlite.SqliteStore.open
    store = await journal_store(path)
    traced = {"spans": spans} if spans is not None else {}  # a checkout without spans: off
    return Runtime(Context.open(service, store=store, providers=providers, **traced))


async def ankka_turn(
    base_url: str, workdir: Path, wire: str = "chat", tracing: str = "off"
) -> tuple[Turn, Callable[[], Awaitable[None]]]:
    from ankka.runtime.agents import Service
    from ankka.runtime.agents import Turn as Effect
    from ankka.runtime.tools import tool

    service = Service("bench")
    weather_tool = tool(get_weather)

    @service.agent("weather")
    def weather(request: Any) -> Effect:
        return Effect(message=request.message, instructions=INSTRUCTIONS, tools=[weather_tool])

    provider = ankka_provider(wire, base_url)
    spans = engine_spans(tracing) if tracing != "off" else None
    runtime = await _ankka_runtime(
        service, workdir / f"ankka-{time.monotonic_ns()}.sqlite3", {"default": provider}, spans
    )

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


async def pydantic_ai_sqlite_turn(
    base_url: str, workdir: Path
) -> tuple[Turn, Callable[[], Awaitable[None]]]:
    """pydantic-ai persisting every turn to SQLite before it returns, as ankka does.

    pydantic-ai has no session store; this is what its docs suggest (``new_messages_json``
    stored, ``ModelMessagesTypeAdapter`` to load), on the same SQLite settings as ankka's
    journal (WAL, ``synchronous=FULL``), the commit in a worker thread so the event loop goes
    on, and the history kept in memory once loaded (ankka caches its fold the same way).
    """
    import openai
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessagesTypeAdapter
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = openai.AsyncOpenAI(
        base_url=f"{base_url}/v1", api_key="none", http_client=timed_client()
    )
    model = OpenAIChatModel("standin", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, instructions=INSTRUCTIONS, tools=[get_weather])
    db = sqlite3.connect(
        workdir / f"pydantic-ai-{time.monotonic_ns()}.sqlite3", check_same_thread=False
    )
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(
        "CREATE TABLE turns (session TEXT, seq INTEGER, body BLOB, PRIMARY KEY (session, seq))"
    )
    lock = asyncio.Lock()  # one connection: one writer at a time, as SQLite allows anyway
    histories: dict[str, list[Any]] = {}

    def load(session: str) -> list[Any]:
        rows = db.execute(
            "SELECT body FROM turns WHERE session = ? ORDER BY seq", (session,)
        ).fetchall()
        return [m for (body,) in rows for m in ModelMessagesTypeAdapter.validate_json(body)]

    def append(session: str, seq: int, body: bytes) -> None:
        with db:
            db.execute("INSERT INTO turns VALUES (?, ?, ?)", (session, seq, body))

    async def turn(session: str, message: str) -> None:
        history = histories.get(session)
        if history is None:
            async with lock:
                history = await asyncio.to_thread(load, session)
        result = await agent.run(message, message_history=history or None)
        async with lock:
            await asyncio.to_thread(append, session, len(history), result.new_messages_json())
        histories[session] = result.all_messages()

    async def close() -> None:
        await client.close()
        db.close()

    return turn, close


FRAMEWORKS = {
    "ankka": ankka_turn,
    # ankka with tracing on (engine spans, issue 28): spans dropped, or exported to Jaeger.
    "ankka+spans-noop": ankka_turn,
    "ankka+spans-otlp": ankka_turn,
    "openai-agents": openai_agents_turn,
    "pydantic-ai": pydantic_ai_turn,
    "pydantic-ai+sqlite": pydantic_ai_sqlite_turn,
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
    """Each shape with every framework set up at once, then round by round: each framework in
    turn takes its next ``--slice`` turns (for ``concurrent``, one turn of every session), so a
    burst of load from elsewhere on the machine falls on all of them alike."""
    shapes = [
        Shape("fresh", 1, args.turns),
        Shape("growing", 1, args.growing_turns),
        Shape("concurrent", args.sessions, args.concurrent_turns),
    ]
    results: list[Result] = []
    empty = Path(tempfile.mkdtemp()) / "empty.json"
    empty.write_text("[]")
    with contextlib.ExitStack() as stack:
        if "ankka+spans-otlp" in args.frameworks:
            from tests.support.jaeger import jaeger

            collector = stack.enter_context(jaeger())
            os.environ["ANKKA_BENCH_OTLP"] = collector.otlp_endpoint
        # Export what is buffered (before the collector stops) and stop the exporters.
        stack.callback(lambda: [provider.shutdown() for provider in _TRACERS.values()])
        workdir = stack.enter_context(tempfile.TemporaryDirectory())
        standin = stack.enter_context(
            started(ankka_command("standin", "--script", str(empty), "--port", "0"))
        )
        for shape in shapes:
            total = shape.sessions * shape.turns_per_session
            # one more turn each to warm up (imports, connection pool) before measuring
            async with httpx.AsyncClient() as control:
                await control.put(
                    f"{standin.url}/_standin/script",
                    content=json.dumps(script((total + 1) * len(args.frameworks))),
                )
            turns: dict[str, Turn] = {}
            closers: list[Callable[[], Awaitable[None]]] = []
            try:
                for name in args.frameworks:
                    if name.startswith("ankka"):
                        mode = name.removeprefix("ankka+spans-") if "+" in name else "off"
                        turns[name], close = await ankka_turn(
                            standin.url, Path(workdir), args.wire, mode
                        )
                    else:
                        turns[name], close = await FRAMEWORKS[name](standin.url, Path(workdir))
                    closers.append(close)
                    await turns[name](f"warm-up-{name}-{shape.name}", QUESTION)
                by_name = {name: Result(name, shape.name) for name in args.frameworks}
                step = 1 if shape.name == "concurrent" else args.slice
                for first in range(0, shape.turns_per_session, step):
                    count = min(step, shape.turns_per_session - first)
                    for name in args.frameworks:
                        by_name[name].slices.append(
                            await run_slice(shape, turns[name], first, count)
                        )
            finally:
                for close in closers:
                    await close()
            for result in by_name.values():
                results.append(result)
                print(
                    f"  {result.framework:<18} {shape.name:<11} p50 {result.p50:7.2f} ms  "
                    f"CPU {result.cpu_ms:7.2f} ms/turn  {result.rate:7.1f} turns/s",
                    file=sys.stderr,
                    flush=True,
                )
    return results


def views(results: list[Result], growing_turns: int, window: int) -> list[tuple[str, Result]]:
    """The rows: fresh and concurrent whole; the growing session whole and at the windows of
    turns ending at 800 and 1,600 messages (four a turn), where it reached them."""
    rows: list[tuple[str, Result]] = []
    for r in results:
        if r.shape != "growing":
            rows.append((r.shape, r))
            continue
        rows.append((f"growing to {growing_turns * 4} messages", r))
        for messages in (800, 1600):
            last = messages // 4
            if last <= growing_turns:
                part = r.window(last - window, last)
                if part.slices:
                    rows.append((f"growing, at {messages} messages", part))
    return rows


def report(results: list[Result], growing_turns: int, window: int) -> str:
    lines = [
        "| shape | framework | own time p50 (ms) | own time p99 (ms) | CPU per turn (ms) "
        "| turns/s | ankka ÷ this (turns/s) | this ÷ ankka (CPU) | this ÷ ankka (own p50) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    by_shape: dict[str, dict[str, Result]] = {}
    for label, r in views(results, growing_turns, window):
        by_shape.setdefault(label, {})[r.framework] = r
    for shape, frameworks in by_shape.items():
        ours = frameworks.get("ankka")
        for name, r in frameworks.items():
            rate = f"{ours.rate / r.rate:.2f}×" if ours and name != "ankka" else ""
            cpu = f"{r.cpu_ms / ours.cpu_ms:.2f}×" if ours and name != "ankka" else ""
            own = f"{r.p50 / ours.p50:.2f}×" if ours and name != "ankka" else ""
            lines.append(
                f"| {shape} | {name} | {r.p50:.2f} | {r.p99:.2f} | {r.cpu_ms:.2f} "
                f"| {r.rate:.1f} | {rate} | {cpu} | {own} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=200, help="fresh turns per framework")
    parser.add_argument(
        "--growing-turns",
        type=int,
        default=400,
        help="turns of the growing session (4 messages each)",
    )
    parser.add_argument("--slice", type=int, default=10, help="turns per framework per round")
    parser.add_argument("--sessions", type=int, default=32, help="sessions at once")
    parser.add_argument("--concurrent-turns", type=int, default=10, help="turns per session")
    parser.add_argument(
        "--frameworks", nargs="+", default=list(FRAMEWORKS), choices=list(FRAMEWORKS)
    )
    parser.add_argument(
        "--wire",
        choices=["chat", "responses", "anthropic"],
        default="chat",
        help="the wire ankka speaks to the stand-in (the peers always speak Chat Completions)",
    )
    parser.add_argument(
        "--loop",
        choices=["asyncio", "uvloop"],
        default="asyncio",
        help="the event loop every framework runs on (ankka serve runs uvloop)",
    )
    parser.add_argument("--baseline", type=Path, help="a checkout to compare ankka against")
    parser.add_argument("--rounds", type=int, default=2, help="with --baseline: rounds")
    args = parser.parse_args()
    if args.baseline is not None:
        return compare(args)
    load = os.getloadavg()
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    if args.loop == "uvloop":
        import uvloop

        loop_factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        results = runner.run(run(args))
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; frameworks "
        f"interleaved {args.slice} turns at a time, on the {args.loop} loop"
    )
    print(report(results, args.growing_turns, args.slice))
    return 0


def compare(args: argparse.Namespace) -> int:
    """ankka from ``--baseline`` and from this checkout, alternated, one process per run."""
    import subprocess

    forwarded = [
        f"--turns={args.turns}",
        f"--growing-turns={args.growing_turns}",
        f"--slice={args.slice}",
        f"--sessions={args.sessions}",
        f"--concurrent-turns={args.concurrent_turns}",
        "--frameworks=ankka",
        f"--wire={args.wire}",
        f"--loop={args.loop}",
    ]
    checkouts = {"before": args.baseline.resolve(), "after": ROOT}
    rows: dict[str, dict[str, list[tuple[str, str]]]] = {}
    load = os.getloadavg()
    for round_ in range(args.rounds):
        order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
        for which in order:
            env = {**os.environ, "ANKKA_FROM": str(checkouts[which])}
            out = subprocess.run(
                [sys.executable, __file__, *forwarded],
                cwd=checkouts[which],
                env=env,
                capture_output=True,
                text=True,
                check=True,
                timeout=1800,
            ).stdout
            for line in out.splitlines():
                cells = [c.strip() for c in line.strip("|").split("|")]
                if len(cells) >= 6 and cells[1] == "ankka":
                    # own time p50 and CPU per turn
                    rows.setdefault(cells[0], {}).setdefault(which, []).append((cells[2], cells[4]))
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; before = "
        f"{checkouts['before']}, after = {checkouts['after']}, {args.rounds} rounds alternated, "
        f"wire {args.wire}, {args.loop} loop"
    )
    print("| shape | own p50 (ms), before | after | CPU per turn (ms), before | after |")
    print("|---|---|---|---|---|")
    for shape, by in rows.items():
        before, after = by.get("before", []), by.get("after", [])
        print(
            f"| {shape} | {', '.join(o for o, _ in before)} | {', '.join(o for o, _ in after)} "
            f"| {', '.join(c for _, c in before)} | {', '.join(c for _, c in after)} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
