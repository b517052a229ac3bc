"""Judgments on a real model: llama.cpp serving SmolLM2 on loopback, and a server without
logprobs refused.

The logprob provider asks each question with the answer constrained by a llama.cpp grammar
(or a JSON schema) to single-token labels, and reads the first decisive token's
``top_logprobs``. These prove it on the real server: distributions summing to 1 with their
coverage, an answer that is exactly a label, both constraint forms, coverage measured before
the constraint, and the triage example through ``ankka serve``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ankka.local import local_model
from ankka.runtime.declare.judgments.seam import Measured
from ankka.runtime.judgments import (
    Choice,
    Inquiry,
    LogprobsMissing,
    OptionLabelSplit,
    Question,
    YesNo,
    ask,
)
from ankka.runtime.providers.chat_completions import ChatCompletionsProvider
from ankka.runtime.providers.logprob_judge import LogprobJudgmentProvider
from ankka.runtime.providers.logprobs import Constraint, encode_question, labels_for
from tests.integration.llamacpp import LlamaServer
from tests.support.processes import Server, ankka_command, start

pytestmark = pytest.mark.integration

LATE = "My parcel was due a week ago and still has not arrived. Where is it?"
URGENT = YesNo("urgent", "Is the customer upset about a delay?")
FRUIT = Choice(
    "fruit",
    "Which of these is a fruit?",
    {"apple": "an apple", "hammer": "a hammer", "car": "a car", "shoe": "a shoe"},
)


def model(llama: LlamaServer) -> ChatCompletionsProvider:
    return ChatCompletionsProvider(name="local", model=llama.model, base_url=llama.openai_base_url)


def judge(
    text: ChatCompletionsProvider,
    *,
    constraint: Constraint = "grammar",
    measured: Measured = "before_constraint",
) -> LogprobJudgmentProvider:
    return LogprobJudgmentProvider(
        name="local",
        model=text.model,
        transport=text,
        constraint=constraint,
        measured=measured,
    )


def grammar_body(llama: LlamaServer, question: Question) -> bytes:
    """The logprob provider's request for ``question`` about LATE, as it sends it."""
    return encode_question(
        model=llama.model,
        text=LATE,
        question=question,
        instructions="",
        constraint="grammar",
        top_logprobs=20,
    )


async def test_a_yes_no_and_a_four_way_choice_get_probabilities_and_coverage(
    llama_server: LlamaServer,
) -> None:
    text = model(llama_server)
    try:
        judgment = await ask(judge(text), Inquiry(LATE, (URGENT, FRUIT)), floor=0.0)
    finally:
        await text.aclose()

    for question, keys in (
        ("urgent", ["yes", "no"]),
        ("fruit", ["apple", "hammer", "car", "shoe"]),
    ):
        answer = judgment.answers[question]
        assert list(answer.probabilities) == keys
        assert sum(answer.probabilities.values()) == pytest.approx(1.0, abs=1e-6)
        assert 0.0 < answer.coverage <= 1.0
        assert answer.measured == "before_constraint"
    assert judgment.usage.input_tokens > 0
    assert judgment.usage.output_tokens >= 2  # one decisive token per question
    assert judgment.model == llama_server.model


async def test_the_grammar_constrained_answer_is_exactly_one_label(
    llama_server: LlamaServer,
) -> None:
    text = model(llama_server)
    body = grammar_body(llama_server, FRUIT)
    try:
        data = await text.post_json("/chat/completions", body)
    finally:
        await text.aclose()

    written = data["choices"][0]["message"]["content"]
    assert written in labels_for(FRUIT)
    assert data["choices"][0]["logprobs"]["content"][0]["token"] == written


async def test_a_label_written_in_two_tokens_is_refused_at_its_first_answer(
    llama_server: LlamaServer,
) -> None:
    # Past 62 options the labels are two letters; under the grammar SmolLM2 writes "A" first,
    # which begins 26 labels and decides nothing.
    many = Choice("city", "Which is the capital of France?", [f"c{i}" for i in range(70)])
    text = model(llama_server)
    try:
        with pytest.raises(OptionLabelSplit, match=r"question 'city' cannot be asked") as refused:
            await ask(judge(text), Inquiry("Geography.", (many,)), floor=0.0)
    finally:
        await text.aclose()
    assert "more than one token" in str(refused.value)


async def test_a_json_schema_constraint_is_read_past_its_shared_prefix(
    llama_server: LlamaServer,
) -> None:
    text = model(llama_server)
    try:
        judgment = await ask(
            judge(text, constraint="json_schema"), Inquiry(LATE, (FRUIT,)), floor=0.0
        )
    finally:
        await text.aclose()

    answer = judgment.answers["fruit"]
    assert sum(answer.probabilities.values()) == pytest.approx(1.0, abs=1e-6)
    assert 0.0 < answer.coverage <= 1.0


async def test_coverage_is_measured_before_the_grammar_masks_the_other_tokens(
    llama_server: LlamaServer,
) -> None:
    # llama.cpp reports the model's own distribution (post_sampling_probs off): the decisive
    # token's alternatives include tokens the grammar forbids, which is what coverage measures.
    text = model(llama_server)
    body = grammar_body(llama_server, FRUIT)
    try:
        data = await text.post_json("/chat/completions", body)
        judgment = await ask(judge(text), Inquiry(LATE, (FRUIT,)), floor=0.0)
    finally:
        await text.aclose()

    alternatives = [
        t["token"] for t in data["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    ]
    assert set(alternatives) - set(labels_for(FRUIT))  # tokens the grammar would never allow
    assert judgment.answers["fruit"].coverage < 1.0
    assert judgment.answers["fruit"].measured == "before_constraint"


@pytest.fixture
def serve_triage(tmp_path: Path) -> Iterator[Callable[[str, str], Server]]:
    """``ankka serve examples.triage:service`` with the default model at ``url`` (…/v1)."""
    servers: list[Server] = []

    def make(url: str, model_name: str) -> Server:
        server = start(
            ankka_command(
                "serve",
                "examples.triage:service",
                "--port",
                "0",
                "--store",
                f"sqlite:///{tmp_path}/triage.sqlite3",
            ),
            env={
                "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
                "ANKKA_MODEL_DEFAULT_URL": url,
                "ANKKA_MODEL_DEFAULT_MODEL": model_name,
            },
        )
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def test_the_triage_example_answers_over_http_on_the_real_model(
    llama_server: LlamaServer, serve_triage: Callable[[str, str], Server]
) -> None:
    server = serve_triage(llama_server.openai_base_url, llama_server.model)

    answer = httpx.post(
        f"{server.url}/v1/agents/triage/judgments",
        json={"text": "I was charged twice for my order, please refund one payment."},
        timeout=120,
    )

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body["answers"]) == {"urgent", "team"}
    assert list(body["answers"]["urgent"]["probabilities"]) == ["yes", "no"]
    assert list(body["answers"]["team"]["probabilities"]) == ["billing", "shipping", "other"]
    for answered in body["answers"].values():
        assert sum(answered["probabilities"].values()) == pytest.approx(1.0, abs=1e-6)
        assert 0.5 <= answered["coverage"] <= 1.0  # the example keeps the default floor
    assert body["usage"]["input_tokens"] > 0


def test_the_judgments_route_refuses_a_bad_body_and_an_unknown_handler(
    llama_server: LlamaServer, serve_triage: Callable[[str, str], Server]
) -> None:
    server = serve_triage(llama_server.openai_base_url, llama_server.model)

    empty = httpx.post(f"{server.url}/v1/agents/triage/judgments", json={"text": ""})
    wrong = httpx.post(f"{server.url}/v1/agents/triage/judgments", json={"message": "hi"})
    unknown = httpx.post(f"{server.url}/v1/agents/nobody/judgments", json={"text": "hi"})

    assert empty.status_code == 422 and '"text"' in empty.json()["error"]["message"]
    assert wrong.status_code == 422
    assert unknown.status_code == 404
    assert "'nobody'" in unknown.json()["error"]["message"]
    assert "triage" in unknown.json()["error"]["message"]


def test_a_server_without_logprobs_is_refused_naming_the_model_and_the_capability(
    standin: Callable[[Any], Server], serve_triage: Callable[[str, str], Server]
) -> None:
    # The stand-in speaks Chat Completions but its answers carry no logprobs.
    upstream = standin([{"text": "A"}, {"text": "A"}])
    server = serve_triage(f"{upstream.url}/v1", "plain-model")

    answer = httpx.post(
        f"{server.url}/v1/agents/triage/judgments", json={"text": "Where is my parcel?"}
    )

    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert error["type"] == "model_lacks_capability"
    assert "'plain-model'" in error["message"]
    assert "'logprobs'" in error["message"]


async def test_the_logprob_provider_refuses_an_answer_without_logprobs(
    standin: Callable[[Any], Server],
) -> None:
    upstream = standin([{"text": "A"}])
    text = ChatCompletionsProvider(name="plain", model="m", base_url=f"{upstream.url}/v1")
    try:
        with pytest.raises(LogprobsMissing, match="'m' cannot answer judgments"):
            await ask(judge(text), Inquiry(LATE, (URGENT,)))
    finally:
        await text.aclose()
    async with httpx.AsyncClient() as http:
        recorded = (await http.get(f"{upstream.url}/_standin/requests")).json()
    sent = recorded["requests"][0]["body"]
    assert sent["logprobs"] is True


@pytest.fixture
def serve_guarded(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], Server]]:
    """``ankka serve`` on the integration service with the given model settings."""
    servers: list[Server] = []

    def make(env: dict[str, str]) -> Server:
        store = f"sqlite:///{tmp_path}/guarded-{len(servers)}.sqlite3"
        command = ankka_command(
            "serve", "tests.integration.services:service", "--port", "0", "--store", store
        )
        server = start(command, env=env)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def models(default: str, judge: str, name: str) -> dict[str, str]:
    return {
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": default,
        "ANKKA_MODEL_DEFAULT_MODEL": name,
        "ANKKA_MODEL_JUDGE_PRESET": "openai-compatible",
        "ANKKA_MODEL_JUDGE_URL": judge,
        "ANKKA_MODEL_JUDGE_MODEL": name,
        "ANKKA_MODEL_JUDGE_TIMEOUT": "10",
    }


def test_a_judged_guardrail_on_the_real_model_refuses_and_counts_its_tokens(
    llama_server: LlamaServer, serve_guarded: Callable[[dict[str, str]], Server]
) -> None:
    url = llama_server.openai_base_url
    server = serve_guarded(models(url, url, llama_server.model))

    answer = httpx.post(
        f"{server.url}/v1/agents/guarded/sessions/g1", json={"message": "Hello!"}, timeout=120
    )
    summary = httpx.get(f"{server.url}/v1/sessions/g1").json()

    assert answer.status_code == 403, answer.text
    assert "input guardrail 'mentions_anything'" in answer.json()["error"]["message"]
    assert summary["messages"] == 0  # a refused turn writes no messages...
    assert summary["judgment_usage"]["input_tokens"] > 0  # ...but its judgment's tokens count
    assert summary["judgment_usage"]["output_tokens"] == 1


def test_a_judged_guardrail_whose_model_is_down_answers_503_and_refuses_nothing(
    standin: Callable[[Any], Server], serve_guarded: Callable[[dict[str, str]], Server]
) -> None:
    upstream = standin([{"text": "unused"}])
    nobody = f"http://127.0.0.1:{local_model.free_port()}/v1"  # nothing listens there
    server = serve_guarded(models(f"{upstream.url}/v1", nobody, "m"))

    answer = httpx.post(
        f"{server.url}/v1/agents/guarded/sessions/g2", json={"message": "Hello!"}, timeout=120
    )

    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["type"] == "guardrail_check_failed"
    assert "'mentions_anything' could not decide" in answer.json()["error"]["message"]
    assert httpx.get(f"{upstream.url}/_standin/requests").json()["requests"] == []
    assert httpx.get(f"{server.url}/v1/sessions/g2").json()["messages"] == 0
