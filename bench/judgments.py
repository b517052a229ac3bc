"""Judgments on SmolLM2 (llama.cpp) against asking the same questions as plain completions.

Two ways to get "is it urgent?" and "which team?" out of a small local model:

- **judgment**: ankka's logprob provider; per question one request constrained by a grammar
  to one label token (``max_tokens`` 1), the distribution read from its ``top_logprobs``,
  verified by ``ask``;
- **text**: the same questions as plain completions ("answer with one word"), the answer
  parsed as text (``max_tokens`` 8); an answer that names no option is a *miss*.

Both run against one llama.cpp server, alternating message by message in the same run. Printed:
judgments per second (both questions answered), p50 latency, tokens generated per judgment,
and misses. Then the **platform's own overhead per judgment**: the same two pre-built requests
sent with a bare ``httpx`` client vs through ``ask`` (p50 difference), and the pure work
(encoding both requests, reading both answers, verifying) timed on recorded answers.

Run: ``python bench/judgments.py`` (``--messages N``); needs the local model
(``bash scripts/local_model.sh``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ankka.local import local_model
from ankka.runtime.judgments import Inquiry, ask
from ankka.runtime.judgments.logprob_provider import LogprobJudgmentProvider
from ankka.runtime.judgments.logprobs import encode_question, read_answer
from ankka.runtime.judgments.verify import verify_answer
from ankka.runtime.providers.chat_completions import ChatCompletionsProvider
from examples.triage import TEAM, URGENT

MESSAGES = [
    "I was charged twice for my order, please refund one payment.",
    "My parcel was due a week ago and the tracking has not moved.",
    "Do you sell gift cards?",
    "The courier left my package at the wrong address, I need it today!",
    "Can I change the email address on my account?",
    "Your invoice shows the wrong VAT number.",
]
QUESTIONS = (URGENT, TEAM)
TEXT_PROMPTS = {
    "urgent": "Does the customer need help today? Answer with one word: yes or no.",
    "team": "Which team should answer: billing, shipping or other? Answer with one word.",
}


def p50(values: list[float]) -> float:
    return statistics.median(values) * 1000


async def text_answer(
    http: httpx.AsyncClient, url: str, model: str, message: str, question: str
) -> tuple[str, int]:
    body = {
        "model": model,
        "messages": [
            {"role": "system", "content": "You triage customer messages for a web shop."},
            {
                "role": "user",
                "content": f"A customer wrote:\n{message}\n\n{TEXT_PROMPTS[question]}",
            },
        ],
        "max_tokens": 8,
        "temperature": 0.0,
    }
    data = (await http.post(f"{url}/chat/completions", json=body)).json()
    return data["choices"][0]["message"]["content"], int(data["usage"]["completion_tokens"])


def parse(question: str, text: str) -> str | None:
    words = [w.strip(".,!:;\"'").lower() for w in text.split()]
    keys = ("yes", "no") if question == "urgent" else ("billing", "shipping", "other")
    return next((w for w in words if w in keys), None)


async def compare(url: str, model: str, rounds: int) -> dict[str, Any]:
    text_provider = ChatCompletionsProvider(name="default", model=model, base_url=url)
    judge = LogprobJudgmentProvider(name="default", model=model, transport=text_provider)
    judged: list[float] = []
    plain: list[float] = []
    raw: list[float] = []
    judged_tokens = plain_tokens = misses = 0
    async with httpx.AsyncClient(timeout=120) as http:
        for i in range(rounds):
            message = MESSAGES[i % len(MESSAGES)]
            inquiry = Inquiry(f"A customer wrote:\n{message}", QUESTIONS)
            started = time.perf_counter()
            judgment = await ask(judge, inquiry, floor=0.0)
            judged.append(time.perf_counter() - started)
            judged_tokens += judgment.usage.output_tokens
            started = time.perf_counter()
            for question in QUESTIONS:
                text, generated = await text_answer(http, url, model, message, question.id)
                plain_tokens += generated
                misses += parse(question.id, text) is None
            plain.append(time.perf_counter() - started)
            bodies = [_body(model, inquiry.text, q) for q in QUESTIONS]
            started = time.perf_counter()
            for body in bodies:
                (await http.post(f"{url}/chat/completions", content=body)).json()
            raw.append(time.perf_counter() - started)
    await text_provider.aclose()
    return {
        "judged": judged,
        "plain": plain,
        "raw": raw,
        "judged_tokens": judged_tokens / rounds,
        "plain_tokens": plain_tokens / rounds,
        "misses": misses,
        "asked": rounds * len(QUESTIONS),
    }


def _body(model: str, text: str, question: Any) -> bytes:
    return encode_question(
        model=model,
        text=text,
        question=question,
        instructions="",
        constraint="grammar",
        top_logprobs=20,
    )


def pure_overhead(recorded: dict[str, dict[str, Any]], model: str, repeats: int) -> float:
    """Microseconds of ankka's own work per judgment: encode, read, verify both questions."""
    started = time.perf_counter()
    for _ in range(repeats):
        for question in QUESTIONS:
            _body(model, "A customer wrote: something", question)
            given = read_answer(
                recorded[question.id], question, constraint="grammar", measured="before_constraint"
            )
            verify_answer("default", question, given, floor=0.0)
    return (time.perf_counter() - started) / repeats * 1e6


async def record(url: str, model: str) -> dict[str, dict[str, Any]]:
    async with httpx.AsyncClient(timeout=120) as http:
        return {
            q.id: (
                await http.post(f"{url}/chat/completions", content=_body(model, MESSAGES[0], q))
            ).json()
            for q in QUESTIONS
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=30, help="judgments per way (default 30)")
    args = parser.parse_args()
    with local_model.start(ctx=2048, ready_timeout=120.0) as server:
        url = f"{server.base_url}/v1"
        asyncio.run(compare(url, server.model_name, 3))  # warm the server and its cache
        found = asyncio.run(compare(url, server.model_name, args.messages))
        recorded = asyncio.run(record(url, server.model_name))
    micro = pure_overhead(recorded, server.model_name, 2000)
    rounds = args.messages
    print(f"SmolLM2-135M on llama.cpp, {rounds} judgments of 2 questions per way")
    print("| way | judgments/s | p50 per judgment (ms) | tokens generated | misses |")
    print("|---|---:|---:|---:|---:|")
    for name, key, tokens, misses in (
        ("judgment (logprobs, grammar)", "judged", found["judged_tokens"], "0 (by construction)"),
        (
            "plain completion, parsed",
            "plain",
            found["plain_tokens"],
            f"{found['misses']}/{found['asked']}",
        ),
    ):
        times = found[key]
        print(
            f"| {name} | {rounds / sum(times):.1f} | {p50(times):.1f} | {tokens:.1f} | {misses} |"
        )
    overhead = p50(found["judged"]) - p50(found["raw"])
    print(f"\nsame two requests with bare httpx: p50 {p50(found['raw']):.1f} ms")
    print(f"platform overhead per judgment (p50 difference): {overhead:.2f} ms")
    print(f"pure work per judgment (encode + read + verify, 2 questions): {micro:.1f} µs")
    print(json.dumps({"load_average": list(os.getloadavg())}))


if __name__ == "__main__":
    main()
