"""What encoding one request body costs, whole and spliced, on each wire, in process.

A session of ``--messages`` messages (four a turn: question, tool call, tool result, answer),
ending in the last turn's tool round with a reasoning item (Responses) or thinking block
(Anthropic) replayed on its call, is encoded the way a provider encodes it: whole (a miss: the
first call after a restart, a compaction or an eviction), and spliced (the session's previous
request already kept in an :class:`~ankka.runtime.providers.prefixes.EncodedPrefixes`: the turn's
two calls, per call). No I/O; nothing but the encoders is measured.

Run: ``python bench/request_encoding.py`` from a checkout (``--messages N``, ``--repeat N``).
In a checkout without ``providers/prefixes.py`` (before issue 11's splice on every wire) only
the whole encoding is measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.environ.get("ANKKA_FROM") or str(Path(__file__).resolve().parents[1]))

from ankka.runtime.providers import anthropic_wire, chat_wire, responses_wire
from ankka.runtime.providers.base import ModelRequest
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ProviderState,
    ToolCall,
    ToolResult,
    UserMessage,
)

WIRES: list[tuple[str, Any, dict[str, Any]]] = [
    ("chat", chat_wire, {}),
    ("responses", responses_wire, {}),
    ("anthropic", anthropic_wire, {"max_tokens": 1024}),
]


def turn(n: int, wire: str, replay: bool) -> list[Message]:
    item = {"type": "reasoning", "encrypted_content": "x" * 40, "signature": "s"}
    state = ProviderState(wire, (item,)) if replay else None
    call = ToolCall(f"call_{n}", "get_weather", '{"city": "Helsinki"}')
    return [
        UserMessage(f"What is the weather in Helsinki? ({n})"),
        AssistantMessage(None, (call,), provider_state=state),
        ToolResult(f"call_{n}", "get_weather", "Helsinki: -3 °C, light snow"),
        AssistantMessage("It is -3 °C with light snow."),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=800, help="the session's length")
    parser.add_argument("--repeat", type=int, default=30, help="measurements per case")
    args = parser.parse_args()
    try:
        from ankka.runtime.providers.prefixes import EncodedPrefixes
    except ImportError:
        EncodedPrefixes = None  # type: ignore[assignment,misc]
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}")
    for name, module, options in WIRES:
        history = [m for n in range(args.messages // 4 - 1) for m in turn(n, name, False)]
        last = turn(args.messages // 4, name, True)
        earlier = ModelRequest("Be brief.", tuple(history))
        calls = [ModelRequest("Be brief.", tuple(history + last[:k])) for k in (1, 3)]
        whole: list[float] = []
        spliced: list[float] = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            body = module.encode_request(calls[1], model="m", stream=False, **options)
            whole.append(time.perf_counter() - started)
            if EncodedPrefixes is not None:
                memo = EncodedPrefixes()
                module.encode_request(earlier, model="m", stream=False, memo=memo, **options)
                started = time.perf_counter()
                for request in calls:
                    module.encode_request(request, model="m", stream=False, memo=memo, **options)
                spliced.append((time.perf_counter() - started) / len(calls))
        line = (
            f"{name:<10} {len(calls[1].messages)} messages, {len(body) / 1024:.0f} KB: "
            f"whole {statistics.median(whole) * 1000:.3f} ms"
        )
        if spliced:
            line += f", spliced {statistics.median(spliced) * 1000:.3f} ms per call"
        print(line + f" (p50 of {args.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
