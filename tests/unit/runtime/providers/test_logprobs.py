"""Reading a distribution from the first decisive token of a Chat Completions answer.

The answers are shaped like llama.cpp's (see /work/shared/reference: ``choices[0].logprobs
.content[i]`` with ``token``, ``logprob`` and ``top_logprobs``).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from ankka.api.capabilities import carries_logprobs
from ankka.runtime.judgments import (
    Choice,
    JudgmentFailed,
    LogprobsMissing,
    OptionLabelSplit,
    Score,
    YesNo,
)
from ankka.runtime.providers.logprobs import (
    encode_question,
    labels_for,
    read_answer,
)

TEAM = Choice("team", "Which team?", ["billing", "shipping", "other"])
FROM = {"provider": "local", "model": "smol"}


def token(text: str, alternatives: dict[str, float]) -> dict[str, Any]:
    return {
        "token": text,
        "logprob": math.log(alternatives.get(text, 1e-9)),
        "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in alternatives.items()],
    }


def answer(*tokens: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"message": {"content": ""}, "logprobs": {"content": list(tokens)}}]}


def test_labels_are_single_characters_up_to_62_options_and_digits_for_a_score() -> None:
    assert labels_for(TEAM) == ("A", "B", "C")
    assert labels_for(Score("s", "How?", levels=4)) == ("0", "1", "2", "3")
    many = labels_for(Choice("c", "Which?", [f"k{i}" for i in range(62)]))
    assert many[-1] == "9" and all(len(label) == 1 for label in many)
    more = labels_for(Choice("c", "Which?", [f"k{i}" for i in range(63)]))
    assert more[:2] == ("AA", "AB") and all(len(label) == 2 for label in more)


def test_the_grammar_form_reads_the_first_token_and_reports_the_coverage() -> None:
    data = answer(token("B", {"B": 0.5, "A": 0.2, "The": 0.2, "C": 0.05}))
    got = read_answer(data, TEAM, constraint="grammar", measured="before_constraint", **FROM)
    assert got.coverage == pytest.approx(0.75)
    assert got.probabilities["billing"] == pytest.approx(0.2 / 0.75)
    assert got.probabilities["shipping"] == pytest.approx(0.5 / 0.75)
    assert got.probabilities["other"] == pytest.approx(0.05 / 0.75)
    assert got.measured == "before_constraint"


def test_an_option_missing_from_the_top_tokens_has_probability_zero() -> None:
    data = answer(token("A", {"A": 0.9, "Hello": 0.05}))
    got = read_answer(data, TEAM, constraint="grammar", measured="before_constraint", **FROM)
    assert got.probabilities == {"billing": 1.0, "shipping": 0.0, "other": 0.0}
    assert got.coverage == pytest.approx(0.9)


def test_no_option_among_the_likeliest_tokens_fails_with_coverage_zero() -> None:
    data = answer(token("A", {"Hello": 0.6, "The": 0.3}))
    with pytest.raises(JudgmentFailed, match=r"coverage 0") as failed:
        read_answer(data, TEAM, constraint="grammar", measured="before_constraint", **FROM)
    assert failed.value.coverage == 0.0


def test_a_token_that_runs_past_a_label_counts_for_no_option() -> None:
    # "Apple" begins with the label A but is a word, not the answer "A".
    data = answer(token("A", {"A": 0.4, "Apple": 0.4, "B": 0.2}))
    got = read_answer(data, TEAM, constraint="grammar", measured="before_constraint", **FROM)
    assert got.coverage == pytest.approx(0.6)


def test_the_json_form_reads_the_token_after_the_key_whatever_came_first() -> None:
    # llama.cpp lets the model open a code fence before the JSON; the label follows "answer": ".
    data = answer(
        token("```", {"```": 0.5, "{": 0.4}),
        token("json", {"json": 0.9}),
        token("\n", {"\n": 0.99}),
        token("{", {"{": 0.99}),
        token("\n ", {"\n ": 0.99}),
        token(' "', {' "': 0.99}),
        token("answer", {"answer": 0.99}),
        token('":', {'":': 0.9, '": "': 0.09}),
        token(' "', {' "': 0.9}),
        token("C", {"C": 0.6, "A": 0.3, '"': 0.1}),
        token('"', {'"': 1.0}),
    )
    got = read_answer(data, TEAM, constraint="json_schema", measured="after_constraint", **FROM)
    assert got.coverage == pytest.approx(0.9)
    assert got.probabilities["other"] == pytest.approx(0.6 / 0.9)
    assert got.measured == "after_constraint"


def test_a_token_that_closes_the_key_and_opens_the_label_is_decisive() -> None:
    data = answer(
        token('{"answer', {'{"answer': 0.99}),
        token('":"B', {'":"B': 0.5, '":"A': 0.25, '":"': 0.25}),
    )
    got = read_answer(data, TEAM, constraint="json_schema", measured="before_constraint", **FROM)
    assert got.coverage == pytest.approx(0.75)
    assert got.probabilities["shipping"] == pytest.approx(0.5 / 0.75)


def test_an_answer_without_logprobs_is_told_apart() -> None:
    data = {"choices": [{"message": {"content": "A"}, "finish_reason": "stop"}]}
    with pytest.raises(LogprobsMissing, match=r"model 'smol' cannot answer judgments"):
        read_answer(data, TEAM, constraint="grammar", measured="before_constraint", **FROM)


def test_a_written_answer_that_is_no_label_is_unreadable() -> None:
    data = answer(token("The", {"The": 0.6, "A": 0.1}))
    with pytest.raises(JudgmentFailed, match=r"'local'.*none of the labels.*did not enforce"):
        read_answer(data, TEAM, constraint="grammar", measured="before_constraint", **FROM)


def test_a_label_split_by_the_tokenizer_is_found_out() -> None:
    many = Choice("c", "Which?", [f"k{i}" for i in range(70)])
    data = answer(token("A", {"A": 0.9}), token("B", {"B": 0.9}))
    with pytest.raises(OptionLabelSplit, match=r"question 'c' cannot be asked of model 'smol'"):
        read_answer(data, many, constraint="grammar", measured="before_constraint", **FROM)


def test_the_request_puts_the_text_first_and_constrains_to_the_labels() -> None:
    body = json.loads(
        encode_question(
            model="m",
            text="My parcel is late.",
            question=YesNo("urgent", "Urgent?"),
            instructions="",
            constraint="grammar",
            top_logprobs=20,
        )
    )
    assert body["grammar"] == 'root ::= "A" | "B"'
    assert body["logprobs"] is True and body["top_logprobs"] == 20
    assert body["max_tokens"] == 1
    assert body["messages"][1]["content"].startswith("My parcel is late.")
    assert (
        "Urgent?\nA. yes\nB. no\nReply with only the letter (A, B)."
        in body["messages"][1]["content"]
    )


def test_the_json_schema_request_enumerates_the_labels() -> None:
    body = json.loads(
        encode_question(
            model="m",
            text="t",
            question=TEAM,
            instructions="Triage.",
            constraint="json_schema",
            top_logprobs=5,
        )
    )
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["answer"]["enum"] == ["A", "B", "C"]
    assert "grammar" not in body
    assert body["messages"][0]["content"] == "Triage."


def test_the_probe_tells_an_answer_with_logprobs_from_one_without() -> None:
    with_them = answer(token("Yes", {"Yes": 0.7}))
    without = {"choices": [{"message": {"content": "Yes"}}]}
    assert carries_logprobs(with_them)
    assert not carries_logprobs(without)
    assert not carries_logprobs({"choices": []})
