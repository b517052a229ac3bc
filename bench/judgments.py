"""Judgments on SmolLM2 (llama.cpp) against asking the same questions as plain completions.

Two ways to get "is it urgent?" and "which team?" out of a small local model:

- **judgment**: ankka's logprob provider; per question one request constrained by a grammar
  to one label token (``max_tokens`` 1), the distribution read from its ``top_logprobs``,
  verified by ``ask``;
- **text**: the same questions as plain completions ("answer with one word"), the answer
  parsed as text (``max_tokens`` 8); an answer that names no option is a *miss*.

Both run against one llama.cpp server, alternating message by message in the same run. Printed:
judgments per second (both questions answered), p50 latency, tokens generated per judgment,
and misses. Then the **platform's own overhead per judgment**, away from the model's noise: the
two answers SmolLM2 gave are recorded and replayed by a loopback server, and a judgment through
``ask`` (the openai-SDK transport, encoding, reading, verifying) is timed against the same two
requests sent with a bare ``httpx`` client, alternating; and the pure work alone (encoding,
reading, verifying, no I/O).

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
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ankka.local import local_model
from ankka.runtime.declare.judgments.verify import verify_answer
from ankka.runtime.judgments import Inquiry, ask
from ankka.runtime.providers.chat_completions import ChatCompletionsProvider
from ankka.runtime.providers.logprob_judge import LogprobJudgmentProvider
from ankka.runtime.providers.logprobs import encode_question, read_answer
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
# The same questions and option words as the judgment's, asked for one word of text.
TEXT_PROMPTS = {
    "urgent": f"{URGENT.text}\nAnswer with one word: yes or no.",
    "team": f"{TEAM.text}\nOptions:\n"
    + "\n".join(o.text for o in TEAM.options)
    + "\nAnswer with one word: billing, shipping or other.",
}


def p50(values: list[float]) -> float:
    return statistics.median(values) * 1000


async def text_answer(
    http: httpx.AsyncClient, url: str, model: str, message: str, question: str
) -> tuple[str, int, int]:
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
    usage = data["usage"]
    return (
        data["choices"][0]["message"]["content"],
        usage["completion_tokens"],
        usage["prompt_tokens"],
    )


def parse(question: str, text: str) -> str | None:
    words = [w.strip(".,!:;\"'").lower() for w in text.split()]
    keys = ("yes", "no") if question == "urgent" else ("billing", "shipping", "other")
    return next((w for w in words if w in keys), None)


async def compare(url: str, model: str, rounds: int) -> dict[str, Any]:
    text_provider = ChatCompletionsProvider(name="default", model=model, base_url=url)
    judge = LogprobJudgmentProvider(name="default", model=model, transport=text_provider)
    judged: list[float] = []
    plain: list[float] = []
    coverages: list[float] = []
    judged_tokens = plain_tokens = judged_prompt = plain_prompt = misses = 0
    async with httpx.AsyncClient(timeout=120) as http:
        for i in range(rounds):
            message = MESSAGES[i % len(MESSAGES)]
            inquiry = Inquiry(f"A customer wrote:\n{message}", QUESTIONS)
            started = time.perf_counter()
            judgment = await ask(judge, inquiry, floor=0.0)
            judged.append(time.perf_counter() - started)
            judged_tokens += judgment.usage.output_tokens
            judged_prompt += judgment.usage.input_tokens
            coverages.extend(a.coverage for a in judgment.answers.values())
            started = time.perf_counter()
            for question in QUESTIONS:
                text, generated, prompt = await text_answer(http, url, model, message, question.id)
                plain_tokens += generated
                plain_prompt += prompt
                misses += parse(question.id, text) is None
            plain.append(time.perf_counter() - started)
    await text_provider.aclose()
    return {
        "judged": judged,
        "plain": plain,
        "judged_tokens": judged_tokens / rounds,
        "plain_tokens": plain_tokens / rounds,
        "judged_prompt": judged_prompt / rounds,
        "plain_prompt": plain_prompt / rounds,
        "misses": misses,
        "coverages": coverages,
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
                recorded[question.id],
                question,
                constraint="grammar",
                measured="before_constraint",
                provider="default",
                model=model,
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


@contextmanager
def replay(recorded: dict[str, dict[str, Any]]) -> Iterator[str]:
    """A loopback server answering each question's request with its recorded answer."""
    answers = {q.id: json.dumps(recorded[q.id]).encode() for q in QUESTIONS}
    marker = {q.id: q.options[-1].text.encode() for q in QUESTIONS}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        found = next(answers[q] for q, m in marker.items() if m in body)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": found})

    port = local_model.free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


async def overhead(url: str, model: str, rounds: int) -> tuple[list[float], list[float]]:
    """Per judgment: through ``ask`` vs the same bytes with bare httpx, alternating."""
    text_provider = ChatCompletionsProvider(name="default", model=model, base_url=url)
    judge = LogprobJudgmentProvider(name="default", model=model, transport=text_provider)
    inquiry = Inquiry(f"A customer wrote:\n{MESSAGES[0]}", QUESTIONS)
    ankka: list[float] = []
    bare: list[float] = []
    async with httpx.AsyncClient() as http:
        for _ in range(rounds):
            started = time.perf_counter()
            await ask(judge, inquiry, floor=0.0)
            ankka.append(time.perf_counter() - started)
            started = time.perf_counter()
            for q in QUESTIONS:
                body = _body(model, inquiry.text, q)
                (await http.post(f"{url}/chat/completions", content=body)).json()
            bare.append(time.perf_counter() - started)
    await text_provider.aclose()
    return ankka, bare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=30, help="judgments per way (default 30)")
    parser.add_argument("--replays", type=int, default=300, help="judgments replayed (default 300)")
    args = parser.parse_args()
    try:
        server = local_model.start(
            ctx=2048, ready_timeout=120.0, say=lambda line: print(line, file=sys.stderr)
        )
    except local_model.LocalModelError as exc:  # not installed, or died every way it started
        raise SystemExit(f"bench/judgments.py: {exc}") from None
    # Without repacking, generation is slower: a figure says which way its server ran.
    print(f"llama-server started {server.started}", file=sys.stderr)
    with server:
        url = f"{server.base_url}/v1"
        asyncio.run(compare(url, server.model_name, 3))  # warm the server and its cache
        found = asyncio.run(compare(url, server.model_name, args.messages))
        recorded = asyncio.run(record(url, server.model_name))
    with replay(recorded) as replay_url:
        asyncio.run(overhead(replay_url, server.model_name, 20))  # warm the connections
        through, bare = asyncio.run(overhead(replay_url, server.model_name, args.replays))
    micro = pure_overhead(recorded, server.model_name, 2000)
    rounds = args.messages
    print(f"SmolLM2-135M on llama.cpp, {rounds} judgments of 2 questions per way")
    print(f"(llama-server started {server.started})")
    print("| way | judgments/s | p50 per judgment (ms) | prompt tokens | generated | misses |")
    print("|---|---:|---:|---:|---:|---:|")
    rows = (
        ("judgment (logprobs, grammar)", "judged", "0 (by construction)"),
        ("plain completion, parsed", "plain", f"{found['misses']}/{found['asked']}"),
    )
    for name, key, misses in rows:
        times = found[key]
        print(
            f"| {name} | {rounds / sum(times):.1f} | {p50(times):.1f} "
            f"| {found[key + '_prompt']:.0f} | {found[key + '_tokens']:.1f} | {misses} |"
        )
    covered = found["coverages"]
    print(
        f"\ncoverage: min {min(covered):.2f}, median {statistics.median(covered):.2f}, "
        f"max {max(covered):.2f}"
    )
    print(f"\nreplayed answers, {args.replays} judgments of 2 questions:")
    print(f"  through ask (SDK transport, encode, read, verify): p50 {p50(through):.3f} ms")
    print(f"  the same two requests with bare httpx:             p50 {p50(bare):.3f} ms")
    print(f"  platform overhead per judgment: {p50(through) - p50(bare):.3f} ms")
    print(f"  pure work per judgment (encode + read + verify, no I/O): {micro:.1f} µs")
    print(json.dumps({"load_average": list(os.getloadavg())}))


if __name__ == "__main__":
    main()
