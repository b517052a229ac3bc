"""Turns over HTTP: ``ankka serve`` against kagent's agent runtime (``kagent-adk``), and the floor.

One run, one stand-in model server on loopback, the same weather agent on both runtimes (one
tool, ``get_weather``; one tool round per turn: two model calls), each a real server driven
over HTTP by a minimal keep-alive client (``bench/gateway_overhead.py``'s):

- ``ankka``: ``ankka serve examples.weather:service``, every turn committed to SQLite (WAL,
  ``synchronous=FULL``) before its reply;
- ``kagent-adk``: ``kagent-adk run weather --local`` (the runtime kagent's agent pods run:
  Google ADK behind A2A JSON-RPC ``message/send``; its sessions in memory), with the model
  built as kagent builds it for ``type: openai`` (``kagent.adk.models.OpenAI``);
- ``floor``: the stand-in driven directly with the two model calls a turn makes, which is the
  most turns per second any runtime could reach here.

Two shapes, interleaved round by round (each target in turn takes its next slice), so load
from elsewhere on the machine falls on all alike: ``fresh`` (one turn per new session, one at
a time) and ``32 sessions`` (``--sessions`` sessions, each taking a turn at once, per round).
Printed: turns/s, latency p50/p99, the server process's CPU time per turn and the stand-in's
(read from ``/proc``; far less sensitive to outside load than turns/s), and the ratios.

Before and after: ``--baseline DIR`` also serves the same agent with ``ankka serve`` from DIR's
checkout (the target ``before``), interleaved with this checkout's like every other target, so
a change to the runtime's HTTP path is measured side by side under the same load.

kagent-adk lives in its own venv (its pins would clash with the development venv; never a
runtime dependency): ``make bench-runtime-http`` builds ``.cache/kagent-venv`` with the pins in
docs/benchmarks.md, or pass ``--kagent PATH`` to its ``kagent-adk`` program.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gateway_overhead import Connection, cpu_seconds, free_port, stop, wait_http
from tests.support.processes import Server, ankka_command, start

QUESTION = "What is the weather in Helsinki?"
INSTRUCTIONS = (
    "You answer questions about the weather. Use get_weather for every city you are asked "
    "about, then answer in one sentence."
)

KAGENT_AGENT = '''"""The weather agent on kagent-adk, for ankka's bench/runtime_http.py."""

from google.adk.agents import Agent
from kagent.adk.models import OpenAI


def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"{{city}}: -3 °C, light snow"


root_agent = Agent(
    name="weather",
    description="Answers questions about the weather.",
    instruction={instructions!r},
    model=OpenAI(model="standin", base_url={base_url!r}, api_key="none", type="openai"),
    tools=[get_weather],
)
'''


@dataclass
class Result:
    target: str
    shape: str
    latencies: list[float] = field(default_factory=list)  # seconds per turn
    wall: float = 0.0
    server_cpu: float = 0.0
    standin_cpu: float = 0.0
    failures: int = 0

    @property
    def turns(self) -> int:
        return len(self.latencies)

    @property
    def rate(self) -> float:
        return self.turns / self.wall if self.wall else float("nan")

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies) or [float("nan")]
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000

    def per_turn(self, seconds: float) -> float:
        return seconds * 1000 / self.turns if self.turns else float("nan")


# ------------------------------------------------------------------ the targets


def request_bytes(host: str, port: int, path: str, body: object, headers: str = "") -> bytes:
    raw = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(raw)}\r\n{headers}\r\n"
    )
    return head.encode() + raw


Turn = Callable[[Connection, str], Awaitable[bool]]  # (connection, session) -> succeeded


def ankka_turn(port: int) -> Turn:
    async def turn(connection: Connection, session: str) -> bool:
        payload = request_bytes(
            "127.0.0.1", port, f"/v1/agents/weather/sessions/{session}", {"message": QUESTION}
        )
        status, body = await connection.exchange(payload)
        return status == 200 and b'"reply"' in body

    return turn


def kagent_turn(port: int) -> Turn:
    async def turn(connection: Connection, session: str) -> bool:
        message = {
            "kind": "message",
            "messageId": uuid.uuid4().hex,
            "role": "user",
            "parts": [{"kind": "text", "text": QUESTION}],
            "contextId": session,
        }
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
        status, body = await connection.exchange(request_bytes("127.0.0.1", port, "/", rpc))
        if status != 200:
            return False
        answer = json.loads(body)
        result = answer.get("result") or {}
        return "error" not in answer and result.get("status", {}).get("state") == "completed"

    return turn


def floor_turn(port: int) -> Turn:
    """The two model calls of a turn, straight to the stand-in: what a runtime sends."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The current weather in a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
    ]
    user = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": QUESTION}]
    call = {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "Helsinki: -3 °C, light snow"}
    first = request_bytes(
        "127.0.0.1",
        port,
        "/v1/chat/completions",
        {"model": "standin", "messages": user, "tools": tools},
    )
    second = request_bytes(
        "127.0.0.1",
        port,
        "/v1/chat/completions",
        {"model": "standin", "messages": [*user, call, result], "tools": tools},
    )

    async def turn(connection: Connection, session: str) -> bool:
        one, _ = await connection.exchange(first)
        two, _ = await connection.exchange(second)
        return one == 200 and two == 200

    return turn


@dataclass(frozen=True)
class Target:
    turn: Turn
    port: int
    pid: int


def script(turns: int) -> dict[str, object]:
    call = {
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Helsinki"}}],
        "usage": {"input_tokens": 100, "output_tokens": 10},
        "when": "user",
    }
    answer = {
        "text": "It is -3 °C with light snow in Helsinki.",
        "usage": {"input_tokens": 120, "output_tokens": 12},
        "when": "tool",
    }
    return {"turns": [call, answer] * turns}


@contextmanager
def kagent_server(program: str, standin: str, work: Path) -> Iterator[Target]:
    agents = work / "kagent"
    (agents / "weather").mkdir(parents=True)
    (agents / "weather" / "__init__.py").write_text("from . import agent\n")
    (agents / "weather" / "agent.py").write_text(
        KAGENT_AGENT.format(instructions=INSTRUCTIONS, base_url=f"{standin}/v1")
    )
    port = free_port()
    card = {
        "name": "weather",
        "description": "Answers questions about the weather.",
        "url": f"http://127.0.0.1:{port}/",
        "version": "0.1.0",
        "capabilities": {"streaming": False},
        "defaultInputModes": ["text"],
        "defaultOutputModes": ["text"],
        "skills": [{"id": "weather", "name": "weather", "description": "weather", "tags": []}],
    }
    (agents / "weather" / "agent-card.json").write_text(json.dumps(card))
    log = (work / "kagent.log").open("w")
    # It refuses to start without naming its kagent controller; with --local it never calls it
    # (port 9 on loopback: nothing listens).
    env = {
        **os.environ,
        "LOG_LEVEL": "warning",
        "OPENAI_API_KEY": "none",
        "KAGENT_URL": "http://127.0.0.1:9",
        "KAGENT_NAME": "weather",
        "KAGENT_NAMESPACE": "bench",
    }
    process = subprocess.Popen(
        [program, "run", "weather", "--local", "--host", "127.0.0.1", "--port", str(port)],
        cwd=agents,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/.well-known/agent-card.json", what="kagent-adk")
        yield Target(kagent_turn(port), port, process.pid)
    finally:
        stop(process)
        log.close()


# ------------------------------------------------------------------ the run


async def run_slice(
    target: Target, result: Result, batches: list[list[str]], standin_pid: int
) -> None:
    """Batch after batch, every session of a batch taking one turn, all at once.

    CPU time is read once around the whole slice: ``/proc`` counts it in clock ticks (10 ms),
    too coarse for one turn."""
    connections = [Connection("127.0.0.1", target.port) for _ in range(max(map(len, batches)))]

    async def one(connection: Connection, session: str) -> None:
        began = time.perf_counter()
        ok = await target.turn(connection, session)
        if ok:
            result.latencies.append(time.perf_counter() - began)
        else:
            result.failures += 1

    server, standin, began = cpu_seconds(target.pid), cpu_seconds(standin_pid), time.perf_counter()
    try:
        for batch in batches:
            await asyncio.gather(*(one(c, s) for c, s in zip(connections, batch, strict=False)))
    finally:
        for connection in connections:
            connection.close()
    result.wall += time.perf_counter() - began
    result.server_cpu += cpu_seconds(target.pid) - server
    result.standin_cpu += cpu_seconds(standin_pid) - standin


async def measure(
    targets: dict[str, Target], standin: Server, args: argparse.Namespace
) -> list[Result]:
    results: list[Result] = []
    # warm-up: a few turns each (imports, first connections), not counted
    for name, target in targets.items():
        await run_slice(
            target, Result(name, "warm-up"), [[f"warm-{name}"]] * 3, standin.process.pid
        )
    fresh = {name: Result(name, "fresh") for name in targets}
    for first in range(0, args.turns, args.slice):
        for name, target in targets.items():
            batches = [
                [f"fresh-{name}-{index}"]
                for index in range(first, min(first + args.slice, args.turns))
            ]
            await run_slice(target, fresh[name], batches, standin.process.pid)
    results.extend(fresh.values())
    shape = f"{args.sessions} sessions"
    many = {name: Result(name, shape) for name in targets}
    for _ in range(args.rounds):
        for name, target in targets.items():
            sessions = [f"many-{name}-{n}" for n in range(args.sessions)]
            await run_slice(target, many[name], [sessions], standin.process.pid)
    results.extend(many.values())
    return results


def report(results: list[Result]) -> list[str]:
    lines = [
        "| shape | target | turns/s | p50 (ms) | p99 (ms) | server CPU per turn (ms) "
        "| stand-in CPU per turn (ms) | failed | ankka ÷ this (turns/s) | this ÷ ankka (CPU) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    shapes: dict[str, dict[str, Result]] = {}
    for r in results:
        shapes.setdefault(r.shape, {})[r.target] = r
    for shape, by_target in shapes.items():
        ours = by_target.get("ankka")
        for name, r in by_target.items():
            other = ours is not None and name != "ankka"
            rate = f"{ours.rate / r.rate:.2f}×" if ours and other and r.turns else ""
            cpu = ""
            if ours and other and name != "floor" and r.turns:
                cpu = f"{r.per_turn(r.server_cpu) / ours.per_turn(ours.server_cpu):.2f}×"
            server = "" if name == "floor" else f"{r.per_turn(r.server_cpu):.2f}"
            lines.append(
                f"| {shape} | {name} | {r.rate:.1f} | {r.percentile(0.5):.2f} | "
                f"{r.percentile(0.99):.2f} | {server} | {r.per_turn(r.standin_cpu):.2f} | "
                f"{r.failures} | {rate} | {cpu} |"
            )
    return lines


def kagent_program(explicit: str | None) -> str:
    for candidate in (explicit, ".cache/kagent-venv/bin/kagent-adk"):
        if candidate and Path(candidate).is_file():
            return str(Path(candidate).resolve())
    raise SystemExit(
        "kagent-adk is not installed: run `make bench-runtime-http` (it builds "
        ".cache/kagent-venv), pass --kagent PATH, or --skip-kagent"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bench/runtime_http.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--turns", type=int, default=200, help="fresh turns per target")
    parser.add_argument("--slice", type=int, default=10, help="fresh turns per target per round")
    parser.add_argument("--sessions", type=int, default=32, help="sessions at once")
    parser.add_argument("--rounds", type=int, default=10, help="turns per session at once")
    parser.add_argument("--kagent", metavar="PATH", help="the `kagent-adk` program")
    parser.add_argument("--skip-kagent", action="store_true", help="leave kagent-adk out")
    parser.add_argument(
        "--baseline", type=Path, metavar="DIR", help="also serve from DIR's checkout (`before`)"
    )
    args = parser.parse_args(argv)

    total = 3 + args.turns + args.sessions * args.rounds
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        empty = work / "script.json"
        empty.write_text(json.dumps(script(0)))
        standin = start(ankka_command("standin", "--script", str(empty), "--port", "0"))
        stack.callback(standin.stop)
        targets: dict[str, Target] = {}
        env = {
            "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
            "ANKKA_MODEL_DEFAULT_URL": f"{standin.url}/v1",
            "ANKKA_MODEL_DEFAULT_MODEL": "standin",
        }
        store = f"sqlite:///{work / 'sessions.sqlite3'}"
        serve = start(
            ankka_command("serve", "examples.weather:service", "--port", "0", "--store", store),
            env=env,
        )
        stack.callback(serve.stop)
        port = httpx.URL(serve.url).port or 80
        targets["ankka"] = Target(ankka_turn(port), port, serve.process.pid)
        if args.baseline is not None:
            before = args.baseline.resolve()
            base_store = f"sqlite:///{work / 'before.sqlite3'}"
            base = start(
                ankka_command(
                    "serve", "examples.weather:service", "--port", "0", "--store", base_store
                ),
                env={**env, "PYTHONPATH": str(before)},
                cwd=before,
            )
            stack.callback(base.stop)
            base_port = httpx.URL(base.url).port or 80
            targets["before"] = Target(ankka_turn(base_port), base_port, base.process.pid)
        if not args.skip_kagent:
            program = kagent_program(args.kagent)
            targets["kagent-adk"] = stack.enter_context(kagent_server(program, standin.url, work))
        standin_port = httpx.URL(standin.url).port or 80
        targets["floor"] = Target(floor_turn(standin_port), standin_port, standin.process.pid)
        turns_needed = total * len(targets)
        httpx.put(
            f"{standin.url}/_standin/script", json=script(turns_needed), timeout=60
        ).raise_for_status()
        load = os.getloadavg()[0]
        results = asyncio.run(measure(targets, standin, args))
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load:.1f} "
            f"at the start, {os.getloadavg()[0]:.1f} at the end; targets interleaved round by "
            "round"
        )
    for line in report(results):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
