"""What compaction costs and saves: one session of --turns turns, compaction off and on.

One run, in one process, side by side: the runtime on SQLite (WAL, synchronous=FULL: every
turn committed before it returns) with a model double at the provider seam that answers at
once, so the figures are the platform's own work. "on" is ``examples/long_chat.py``'s
setting (4,000 characters, the last 6 messages verbatim); the summariser is its own double,
answering a fixed summary. Printed per mode: turns/s (wall clock, the consumer's work in the
same event loop included), the last request's size as Chat Completions JSON and its memory
in characters, compactions, and the summariser's cost: the characters it was sent and
answered, and tokens estimated at 4 characters a token (a double has no tokenizer; a real
model's count is in tests/integration/test_compaction_llamacpp.py).

Run: ``python bench/compaction.py`` (``--turns 5000``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ankka.runtime.compaction import Compaction
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.drivers.context import CompactionSetup, Context
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.engine.view import memory_chars
from ankka.runtime.providers.base import ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.chat_wire import encode_request
from ankka.runtime.records.messages import Usage
from tests.support.stores import journal_store

QUESTION = "Let us keep talking about the weather and other things, shall we?"
ANSWER = "Noted; tell me more whenever you like."
SUMMARY = "They chatted about the weather and other things; nothing was decided yet."
SETTINGS = Compaction(limit_chars=4000, keep_messages=6)  # examples/long_chat.py


class Double:
    """A model double that answers at once and remembers the last request and what it saw."""

    def __init__(self, text: str, *, measure: bool = False) -> None:
        self.text = text
        self.measure = (
            measure  # the largest memory sent (off: the last request's, as it only grows)
        )
        self.largest = 0
        self.calls = 0
        self.chars_in = 0
        self.chars_out = 0
        self.last: ModelRequest | None = None

    name = "default"
    model = "double"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        self.last = request
        if self.measure:
            self.largest = max(self.largest, memory_chars(request.messages[:-1]))
        if self.text == SUMMARY:  # only the summariser's requests are measured per call
            self.chars_in += len(request.instructions) + memory_chars(request.messages)
            self.chars_out += len(self.text)
        return ModelResponse(self.text, (), Usage(), "double")

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        yield await self.complete(request)

    async def aclose(self) -> None:
        return None


@dataclass(frozen=True)
class Result:
    mode: str
    turns: int
    seconds: float
    last_request_bytes: int
    last_memory_chars: int
    largest_memory_chars: int
    compactions: int
    summariser: Double


def service(compaction: Compaction | None) -> Service:
    svc = Service("bench")

    @svc.agent("chat")
    def chat(request: TurnRequest) -> Turn:
        return Turn(message=request.message, instructions="Chat.", compaction=compaction)

    return svc


async def one(mode: str, turns: int, directory: Path) -> Result:
    agent, summariser = Double(ANSWER, measure=mode == "on"), Double(SUMMARY)
    store = await journal_store(directory / f"{mode}.sqlite3")
    settings = SETTINGS if mode == "on" else None
    context = Context.open(
        service(settings),
        store=store,
        providers={"default": agent},
        compaction=CompactionSetup(providers={"default": summariser}),
    )
    async with Runtime(context) as runtime:
        started = time.perf_counter()
        for _ in range(turns):
            await runtime.run(runtime.plan("chat", "s", QUESTION))
        await runtime.context.compactor.idle()
        seconds = time.perf_counter() - started
        assert agent.last is not None
        body = encode_request(agent.last, model="double", stream=False)
        memory = memory_chars(agent.last.messages[:-1])
        compactions = (await runtime.summary("s")).compactions
    largest = agent.largest if agent.measure else memory
    return Result(mode, turns, seconds, len(body), memory, largest, compactions, summariser)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=5000, help="turns in the session")
    args = parser.parse_args()
    if not 1 <= args.turns <= 100_000:
        parser.error("--turns must be between 1 and 100000")
    with tempfile.TemporaryDirectory() as tmp:
        results = [asyncio.run(one(mode, args.turns, Path(tmp))) for mode in ("off", "on")]
    print(
        "| compaction | turns | turns/s | last request (bytes) | memory in it (chars) "
        "| largest memory sent (chars) | compactions | summariser chars in / out "
        "| est. summariser tokens in / out |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        s = r.summariser
        print(
            f"| {r.mode} | {r.turns} | {r.turns / r.seconds:.1f} | {r.last_request_bytes} "
            f"| {r.last_memory_chars} | {r.largest_memory_chars} | {r.compactions} "
            f"| {s.chars_in} / {s.chars_out} | {s.chars_in // 4} / {s.chars_out // 4} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
