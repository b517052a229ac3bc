"""CPU the runtime spends per turn, without a network or a model server: ``Runtime.run`` on
the scripted provider, one session growing turn by turn (one tool round a turn), on SQLite.

``bench/turn_overhead.py`` measures wall time against peers, which on a loaded machine swings
more than a seam change moves it (and includes the wait for each commit's fsync). This
measures the process's CPU time per turn (``time.process_time``, every thread), which is what
a change to the host, the journal or the loop changes. Compare two checkouts back to back::

    (cd ../main && python bench/turn_cpu.py) ; python bench/turn_cpu.py

``--tracing`` also measures the same turns with the engine's spans on (issue 28), spans made,
batched and dropped (``noop``) or exported to a Jaeger it starts (``otlp``), alternated with
tracing off in the one process, and prints each one's ratio to off.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path.cwd()))


def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


async def measure(turns: int, tracing: str = "off") -> list[float]:
    from ankka.runtime.declare.agents import Service, Turn, TurnRequest
    from ankka.runtime.declare.tools import tool
    from ankka.runtime.drivers.context import Context
    from ankka.runtime.drivers.request import Runtime
    from ankka.runtime.providers.scripted import ScriptedProvider

    try:
        from tests.support.stores import journal_store
    except ImportError:  # a checkout from before the one Store (compared runs)
        import importlib

        sqlite = importlib.import_module("ankka.runtime.store.sqlite")
        journal_store = sqlite.SqliteStore.open

    service = Service("bench")
    weather_tool = tool(get_weather)

    @service.agent("weather")
    def weather(request: TurnRequest) -> Turn:
        return Turn(message=request.message, instructions="Be brief.", tools=[weather_tool])

    call = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}
    script: list[dict[str, Any] | str] = [call, "It is sunny."] * turns
    seconds: list[float] = []
    with tempfile.TemporaryDirectory() as workdir:
        store = await journal_store(Path(workdir) / "journal.sqlite3")
        provider = ScriptedProvider(script, name="default")
        traced: dict[str, Any] = {}
        if tracing != "off":
            from bench.turn_overhead import engine_spans

            traced["spans"] = engine_spans(tracing)
        context = Context.open(service, store=store, providers={"default": provider}, **traced)
        runtime: Any = Runtime(context)
        # Before issue 8, run() took (agent, session, message); kept so main can be compared.
        takes_plan = "agent" not in inspect.signature(runtime.run).parameters
        for i in range(turns):
            started = time.process_time()
            if takes_plan:
                await runtime.run(runtime.plan("weather", "s", f"question {i}"))
            else:
                await runtime.run("weather", "s", f"question {i}")
            seconds.append(time.process_time() - started)
        await runtime.aclose()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300, help="turns in the session")
    parser.add_argument("--repeat", type=int, default=3, help="sessions measured (best shown)")
    parser.add_argument(
        "--tracing",
        nargs="*",
        choices=["noop", "otlp"],
        default=[],
        help="also measure with the engine's spans on, alternated with off",
    )
    args = parser.parse_args()
    modes = ["off", *args.tracing]
    with contextlib.ExitStack() as stack:
        if "otlp" in modes:
            from tests.support.jaeger import jaeger

            os.environ["ANKKA_BENCH_OTLP"] = stack.enter_context(jaeger()).otlp_endpoint
        if args.tracing:
            from bench.turn_overhead import _TRACERS

            # What is buffered is exported (before the collector stops), and the exporters end.
            stack.callback(lambda: [provider.shutdown() for provider in _TRACERS.values()])
        runs: dict[str, list[list[float]]] = {mode: [] for mode in modes}
        for round_ in range(args.repeat):
            for mode in modes if round_ % 2 == 0 else reversed(modes):
                runs[mode].append(asyncio.run(measure(args.turns, mode)))
    load = os.getloadavg()[0]
    for mode in modes:
        p50 = min(statistics.median(r) for r in runs[mode]) * 1000
        mean = min(statistics.fmean(r) for r in runs[mode]) * 1000
        ratio = ""
        if mode != "off":
            off = min(statistics.median(r) for r in runs["off"]) * 1000
            ratio = f", {p50 / off:.2f}× off"
        print(
            f"ankka CPU per turn, tracing {mode} ({args.turns} turns, best of {args.repeat}): "
            f"p50 {p50:.3f} ms, mean {mean:.3f} ms{ratio} (load average {load:.1f})"
        )


if __name__ == "__main__":
    main()
