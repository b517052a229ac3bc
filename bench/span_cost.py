"""What tracing costs a turn, counted rather than timed (issue 28's speed goal).

On a loaded machine a turn's CPU time moves more between runs than tracing does, so this
runs a fixed amount of work in one process, to be counted by valgrind's callgrind (every
thread's instructions, the same whatever the load): N turns minus M turns, divided by N - M,
is a turn's count. Three kinds of work:

- ``engine MODE N``: N turns of ``bench/turn_cpu.py`` (the scripted weather agent on SQLite,
  no network), tracing ``off`` or ``noop`` (spans made, batched and dropped);
- ``http MODE N --standin URL``: N fresh turns of ``bench/turn_overhead.py``'s ankka turn
  against an ``ankka standin`` already listening at URL (its own process: not counted);
- ``sdk PART N``: only the OpenTelemetry SDK calls the engine makes for one weather turn (an
  ``invoke_agent``, two ``chat``, one ``execute_tool``), N times: ``bare`` (the four spans
  started and ended, nothing else), ``started`` (with their start attributes) or ``engine``
  (as engine/spans.py makes them: start attributes, the end ones in one call each, attached
  as current), so a turn's count splits into the SDK's parts and ankka's own::

    valgrind --tool=callgrind python bench/span_cost.py engine noop 250   # and 50, and off
    valgrind --tool=callgrind python bench/span_cost.py sdk engine 400    # and 0

Figures: docs/benchmarks.md, "Where tracing's cost goes".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ankka.runtime.engine.spans import Attributes

sys.path.insert(0, str(Path.cwd()))

# The weather turn's spans, as engine/spans.py attributes them (the stand-in's model).
_AGENT: Attributes = {
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.provider.name": "openai",
    "gen_ai.agent.name": "weather",
    "gen_ai.request.model": "standin",
    "ankka.turn": "t-1",
    "gen_ai.conversation.id": "s",
}
_CHAT: Attributes = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "standin",
    "gen_ai.output.type": "text",
    "gen_ai.request.stream": False,
    "gen_ai.conversation.id": "s",
}
_TOOL: Attributes = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "get_weather",
    "gen_ai.tool.call.id": "c1",
    "gen_ai.tool.type": "function",
    "gen_ai.tool.description": "Weather for a city.",
}
_ANSWERED: Attributes = {
    "gen_ai.usage.input_tokens": 100,
    "gen_ai.usage.output_tokens": 10,
    "gen_ai.response.model": "standin",
    "gen_ai.response.finish_reasons": ["tool_calls"],
}
_ENDED: Attributes = {
    "gen_ai.usage.input_tokens": 220,
    "gen_ai.usage.output_tokens": 22,
    "ankka.model_calls": 2,
    "ankka.turn.outcome": "finished",
}


def sdk(part: str, turns: int) -> None:
    from opentelemetry.trace import SpanKind

    from ankka.runtime.engine.spans import EngineSpans
    from bench.turn_overhead import _TRACERS, engine_spans

    spans: EngineSpans = engine_spans("noop")
    tracer = spans.tracer
    client, internal = SpanKind.CLIENT, SpanKind.INTERNAL
    shape = [("invoke_agent weather", _AGENT, internal), ("chat standin", _CHAT, client)]
    shape += [("execute_tool get_weather", _TOOL, internal), ("chat standin", _CHAT, client)]
    for _ in range(turns):
        if part in ("bare", "started"):
            for name, attributes, kind in shape:
                span = tracer.start_span(
                    name, kind=kind, attributes=attributes if part == "started" else None
                )
                span.end()
            continue
        agent, token = spans.start(*shape[0])
        for name, attributes, kind in shape[1:]:
            with spans.span(name, attributes, client=kind == client) as span:
                if span.is_recording() and kind == client:
                    span.set_attributes(_ANSWERED)
        if agent.is_recording():
            agent.set_attributes(_ENDED)
        spans.end(agent, token)
    for provider in _TRACERS.values():
        provider.shutdown()


async def engine(mode: str, turns: int) -> None:
    from bench.turn_cpu import measure
    from bench.turn_overhead import _TRACERS

    await measure(5, mode)  # imports, the first connection
    await measure(turns, mode)
    for provider in _TRACERS.values():
        provider.shutdown()


async def http(mode: str, turns: int, standin: str) -> None:
    import httpx

    from bench import turn_overhead

    script = turn_overhead.script(turns + 3)
    async with httpx.AsyncClient() as control:
        await control.put(f"{standin}/_standin/script", content=json.dumps(script))
    with tempfile.TemporaryDirectory() as workdir:
        turn, close = await turn_overhead.ankka_turn(standin, Path(workdir), "chat", mode)
        for index in range(-3, turns):  # three to warm up (imports, the connection pool)
            await turn(f"fresh-{index}", f"{turn_overhead.QUESTION} ({index})")
        await close()
    for provider in turn_overhead._TRACERS.values():
        provider.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", choices=["engine", "http", "sdk"])
    parser.add_argument("mode", help="engine, http: off or noop; sdk: bare, started or engine")
    parser.add_argument("turns", type=int)
    parser.add_argument("--standin", help="http: the stand-in's URL")
    args = parser.parse_args()
    choices: dict[str, tuple[str, ...]] = {"sdk": ("bare", "started", "engine")}
    if args.mode not in choices.get(args.work, ("off", "noop")):
        parser.error(f"{args.work} takes {' or '.join(choices.get(args.work, ('off', 'noop')))}")
    run: Any
    if args.work == "sdk":
        sdk(args.mode, args.turns)
        return
    if args.work == "engine":
        run = engine(args.mode, args.turns)
    elif args.standin is None:
        parser.error("http needs --standin URL (an `ankka standin` listening)")
    else:
        run = http(args.mode, args.turns, args.standin)
    asyncio.run(run)


if __name__ == "__main__":
    main()
