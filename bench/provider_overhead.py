"""What a model call costs through ankka's providers against the same call on the raw SDK.

ankka's providers use the vendors' SDKs as transport only: they build the request bytes and
read the answer themselves. This measures what that layer costs (or saves) per call: one
stand-in model server on loopback, the same request (instructions, six earlier messages, one
tool) sent by ankka's provider and by the SDK's own typed call (``chat.completions.create``,
``responses.create``, ``messages.create``), alternating call by call in the same run so both
see the same machine. Plain and streamed, on each wire protocol.

Printed per case: p50 and p90 wall time per call and ankka's ratio to the raw SDK at p50
(below 1.00 is faster than the raw SDK). The goal: within 10% of the raw SDK at p50.

Run: ``python bench/provider_overhead.py`` (``--calls N``, ``--warmup N``). Needs the
``anthropic`` extra for the Anthropic rows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ankka.runtime.declare.tools import ToolSpec
from ankka.runtime.providers.base import ModelProvider, ModelRequest, TextDelta
from ankka.runtime.providers.registry import providers_from_environment
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResult,
    UserMessage,
)
from tests.support.processes import ankka_command, started

INSTRUCTIONS = "You answer questions about the weather. Use get_weather, then answer briefly."
WEATHER = ToolSpec(
    "get_weather",
    "The current weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
HISTORY: list[Message] = [
    UserMessage("What is the weather in Helsinki?"),
    AssistantMessage(None, (ToolCall("call_1", "get_weather", '{"city": "Helsinki"}'),)),
    ToolResult("call_1", "get_weather", "Helsinki: -3 °C, light snow"),
    AssistantMessage("Helsinki has light snow at -3 °C."),
    UserMessage("And in Oslo?"),
    AssistantMessage(None, (ToolCall("call_2", "get_weather", '{"city": "Oslo"}'),)),
    ToolResult("call_2", "get_weather", "Oslo: 1 °C, cloudy"),
]
REQUEST = ModelRequest(INSTRUCTIONS, HISTORY, [WEATHER])
ANSWER = "Oslo is cloudy at 1 °C, a little warmer than Helsinki today."

# The same conversation in each SDK's own typed parameters.
CHAT_MESSAGES: list[Any] = [
    {"role": "system", "content": INSTRUCTIONS},
    {"role": "user", "content": "What is the weather in Helsinki?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Helsinki"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "Helsinki: -3 °C, light snow"},
    {"role": "assistant", "content": "Helsinki has light snow at -3 °C."},
    {"role": "user", "content": "And in Oslo?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_2", "content": "Oslo: 1 °C, cloudy"},
]
CHAT_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": WEATHER.name,
            "description": WEATHER.description,
            "parameters": WEATHER.parameters,
        },
    }
]
RESPONSES_INPUT: list[Any] = [
    {"role": "user", "content": "What is the weather in Helsinki?"},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Helsinki"}',
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "Helsinki: -3 °C, light snow"},
    {"role": "assistant", "content": "Helsinki has light snow at -3 °C."},
    {"role": "user", "content": "And in Oslo?"},
    {
        "type": "function_call",
        "call_id": "call_2",
        "name": "get_weather",
        "arguments": '{"city": "Oslo"}',
    },
    {"type": "function_call_output", "call_id": "call_2", "output": "Oslo: 1 °C, cloudy"},
]
RESPONSES_TOOLS: list[Any] = [
    {
        "type": "function",
        "name": WEATHER.name,
        "description": WEATHER.description,
        "parameters": WEATHER.parameters,
        "strict": False,
    }
]
ANTHROPIC_MESSAGES: list[Any] = [
    {"role": "user", "content": [{"type": "text", "text": "What is the weather in Helsinki?"}]},
    {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "call_1",
                "name": "get_weather",
                "input": {"city": "Helsinki"},
            }
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "call_1",
                "content": "Helsinki: -3 °C, light snow",
            }
        ],
    },
    {
        "role": "assistant",
        "content": [{"type": "text", "text": "Helsinki has light snow at -3 °C."}],
    },
    {"role": "user", "content": [{"type": "text", "text": "And in Oslo?"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Oslo"}}
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_2", "content": "Oslo: 1 °C, cloudy"}
        ],
    },
]
ANTHROPIC_TOOLS: list[Any] = [
    {"name": WEATHER.name, "description": WEATHER.description, "input_schema": WEATHER.parameters}
]

Call = Callable[[], Awaitable[str]]


@dataclass
class Case:
    wire: str
    streamed: bool
    ankka: list[float]
    raw: list[float]

    def p(self, samples: list[float], q: int) -> float:
        return statistics.quantiles(samples, n=100)[q - 1] * 1000

    def line(self) -> str:
        a50, r50 = statistics.median(self.ankka) * 1000, statistics.median(self.raw) * 1000
        mode = "stream" if self.streamed else "complete"
        return (
            f"{self.wire:<18} {mode:<9} ankka p50 {a50:6.2f} ms  p90 {self.p(self.ankka, 90):6.2f}"
            f" | raw SDK p50 {r50:6.2f} ms  p90 {self.p(self.raw, 90):6.2f} | ratio {a50 / r50:.2f}"
        )


def ankka_call(provider: ModelProvider, streamed: bool) -> Call:
    async def call() -> str:
        if not streamed:
            return (await provider.complete(REQUEST)).content or ""
        text = ""
        async for item in provider.stream(REQUEST):
            if not isinstance(item, TextDelta):
                text = item.content or ""
        return text

    return call


def raw_call(wire: str, client: Any, streamed: bool) -> Call:
    if wire == "openai-compatible":

        async def chat() -> str:
            if not streamed:
                r = await client.chat.completions.create(
                    model="m", messages=CHAT_MESSAGES, tools=CHAT_TOOLS
                )
                return str(r.choices[0].message.content)
            parts: list[str] = []
            stream = await client.chat.completions.create(
                model="m",
                messages=CHAT_MESSAGES,
                tools=CHAT_TOOLS,
                stream=True,
                stream_options={"include_usage": True},
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    parts.append(chunk.choices[0].delta.content)
            return "".join(parts)

        return chat
    if wire == "openai":

        async def responses() -> str:
            if not streamed:
                r = await client.responses.create(
                    model="m",
                    instructions=INSTRUCTIONS,
                    input=RESPONSES_INPUT,
                    tools=RESPONSES_TOOLS,
                    store=False,
                )
                return str(r.output_text)
            text = ""
            stream = await client.responses.create(
                model="m",
                instructions=INSTRUCTIONS,
                input=RESPONSES_INPUT,
                tools=RESPONSES_TOOLS,
                store=False,
                stream=True,
            )
            async for event in stream:
                if event.type == "response.completed":
                    text = event.response.output_text
            return str(text)

        return responses

    async def messages() -> str:
        if not streamed:
            r = await client.messages.create(
                model="m",
                max_tokens=4096,
                system=INSTRUCTIONS,
                messages=ANTHROPIC_MESSAGES,
                tools=ANTHROPIC_TOOLS,
            )
            return "".join(b.text for b in r.content if b.type == "text")
        parts: list[str] = []
        stream = await client.messages.create(
            model="m",
            max_tokens=4096,
            system=INSTRUCTIONS,
            messages=ANTHROPIC_MESSAGES,
            tools=ANTHROPIC_TOOLS,
            stream=True,
        )
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                parts.append(event.delta.text)
        return "".join(parts)

    return messages


def raw_client(wire: str, base: str) -> Any:
    if wire == "anthropic":
        return anthropic.AsyncAnthropic(api_key="k", base_url=base, max_retries=2, timeout=120)
    return openai.AsyncOpenAI(api_key="k", base_url=f"{base}/v1", max_retries=2, timeout=120)


async def measure(base: str, wire: str, streamed: bool, calls: int, warmup: int) -> Case:
    total = calls + warmup
    turns = [{"text": ANSWER, "usage": {"input_tokens": 180, "output_tokens": 16}}] * (2 * total)
    async with httpx.AsyncClient() as control:
        put = await control.put(f"{base}/_standin/script", content=json.dumps(turns))
        put.raise_for_status()
    url = base if wire == "anthropic" else f"{base}/v1"
    environ = {
        "ANKKA_MODEL_BENCH_PRESET": wire,
        "ANKKA_MODEL_BENCH_MODEL": "m",
        "ANKKA_MODEL_BENCH_URL": url,
        "ANKKA_MODEL_BENCH_API_KEY": "k",
    }
    provider = providers_from_environment(environ)["bench"]
    client = raw_client(wire, base)
    ours, theirs = ankka_call(provider, streamed), raw_call(wire, client, streamed)
    case = Case(wire, streamed, [], [])
    try:
        for i in range(total):
            # Alternate who goes first, so neither always meets a warmer connection.
            order = [(ours, case.ankka), (theirs, case.raw)]
            for call, samples in order if i % 2 == 0 else reversed(order):
                started_at = time.perf_counter()
                text = await call()
                spent = time.perf_counter() - started_at
                if text != ANSWER:
                    raise SystemExit(f"{wire}: a call answered {text!r}, not the scripted answer")
                if i >= warmup:
                    samples.append(spent)
    finally:
        await provider.aclose()
        await client.close()
    return case


async def run(args: argparse.Namespace) -> list[Case]:
    cases: list[Case] = []
    with tempfile.TemporaryDirectory() as workdir:
        empty = Path(workdir) / "script.json"
        empty.write_text("[]")
        with started(ankka_command("standin", "--script", str(empty), "--port", "0")) as standin:
            for wire in ("openai-compatible", "openai", "anthropic"):
                for streamed in (False, True):
                    cases.append(
                        await measure(standin.url, wire, streamed, args.calls, args.warmup)
                    )
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400, help="measured calls per case")
    parser.add_argument("--warmup", type=int, default=40, help="unmeasured calls first")
    args = parser.parse_args()
    cases = asyncio.run(run(args))
    print(f"provider overhead: {args.calls} calls per case after {args.warmup} warm-up calls")
    for case in cases:
        print(case.line())
    worst = max(statistics.median(c.ankka) / statistics.median(c.raw) for c in cases)
    print(f"worst ratio at p50: {worst:.2f} (goal: at most 1.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
