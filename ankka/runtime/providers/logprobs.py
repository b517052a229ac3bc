"""The pure core of the logprob provider: the labels, the request body, reading the answer.

Each question is asked as one Chat Completions request whose answer is constrained to the
labels of its options (a llama.cpp grammar, or a JSON schema for servers that take one). The
labels are chosen here, never by the service: ``A``…``Z``, then ``a``…``z`` and digits, for up
to 62 options (single characters, one token in every byte-level tokenizer); two capital
letters (``AA``…) beyond that, which a model may write in two tokens (a grammar allows ``A``
then ``A``): the first answer that does so is refused (:class:`~.errors.OptionLabelSplit`).
A score's labels are its digits.

The distribution is read from the first *decisive* token: the first generated token that takes
the answer past what comes before every label (for the JSON form, past ``"answer":"``, after
whatever a server let the model write first, such as a code fence). Its ``top_logprobs`` give
each label's probability; a token that begins exactly one option's rendering counts for that
option, any other token for none. The options' share of the probability is the **coverage**;
the answer is the options' probabilities divided by it, and the coverage goes with it, with
where it was measured: llama.cpp reports the model's own distribution, before its grammar
masks anything (its ``post_sampling_probs`` do not reflect the grammar either, which it
applies only when the sampled token breaks it), so its coverage is ``before_constraint``.
"""

from __future__ import annotations

import json
import math
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ankka.runtime.declare.judgments.errors import JudgmentFailed, LogprobsMissing, OptionLabelSplit
from ankka.runtime.declare.judgments.questions import Question
from ankka.runtime.declare.judgments.seam import Measured, ProviderAnswer

__all__ = [
    "Constraint",
    "encode_question",
    "labels_for",
    "read_answer",
]

Constraint = Literal["grammar", "json_schema"]

_SINGLE = tuple(string.ascii_uppercase + string.ascii_lowercase + string.digits)
_DOUBLE = tuple(a + b for a in string.ascii_uppercase for b in string.ascii_uppercase)

DEFAULT_INSTRUCTIONS = (
    "Read the text and the question. Reply with a single character: the label of the best option."
)


@dataclass(frozen=True, slots=True)
class Asked:
    """Whom the answer came from, for the errors: the configured provider and the model."""

    provider: str
    model: str
    question: Question

    def missing(self) -> LogprobsMissing:
        return LogprobsMissing(provider=self.provider, model=self.model, sent=True)

    def split(self, detail: str) -> OptionLabelSplit:
        return OptionLabelSplit(
            f"question {self.question.id!r} cannot be asked of model {self.model!r}: {detail}; "
            "use at most 62 options (they get single-character labels)"
        )

    def failed(self, detail: str, coverage: float | None = None) -> JudgmentFailed:
        return JudgmentFailed(
            self.provider,
            f"question {self.question.id!r}: {detail}",
            coverage=coverage,
            question=self.question.id,
        )


def labels_for(question: Question) -> tuple[str, ...]:
    if question.kind == "score":
        return question.keys
    count = len(question.options)
    return (_SINGLE if count <= len(_SINGLE) else _DOUBLE)[:count]


def _grammar(labels: Sequence[str]) -> str:
    return "root ::= " + " | ".join(f'"{label}"' for label in labels)


def _schema(labels: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "answer",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {"answer": {"type": "string", "enum": list(labels)}},
                "required": ["answer"],
                "additionalProperties": False,
            },
        },
    }


def _opening(constraint: Constraint) -> str:
    """What the answer writes before the label (whitespace left out): nothing for a grammar,
    the key and the opening quote for the JSON form (after anything a server lets the model
    write first, such as a code fence)."""
    return "" if constraint == "grammar" else '"answer":"'


def _rendering(label: str, constraint: Constraint) -> str:
    """What the answer writes from the label on (whitespace left out)."""
    return label if constraint == "grammar" else label + '"'


def encode_question(
    *,
    model: str,
    text: str,
    question: Question,
    instructions: str,
    constraint: Constraint,
    top_logprobs: int,
) -> bytes:
    """The Chat Completions body asking one question. The text comes first and the question
    last, so a judgment's requests share their prefix and a server's prompt cache keeps it."""
    labels = labels_for(question)
    lines = [
        f"{label}. {option.text}" for label, option in zip(labels, question.options, strict=True)
    ]
    kind = "number" if question.kind == "score" else "letter"
    user = (
        f"{text}\n\n{question.text}\n"
        + "\n".join(lines)
        + (f"\nReply with only the {kind} ({', '.join(labels)}).")
    )
    body: dict[str, Any] = {
        "model": model,
        "messages": [
            {"role": "system", "content": instructions or DEFAULT_INSTRUCTIONS},
            {"role": "user", "content": user},
        ],
        "logprobs": True,
        "top_logprobs": top_logprobs,
        "max_tokens": 1 if constraint == "grammar" else 12,
        "temperature": 0.0,
    }
    if constraint == "grammar":
        body["grammar"] = _grammar(labels)
    else:
        body["response_format"] = _schema(labels)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _squash(text: str) -> str:
    return "".join(text.split())


def _probability(entry: Mapping[str, Any]) -> float:
    if "logprob" in entry:
        return math.exp(float(entry["logprob"]))
    return float(entry["prob"])


def read_answer(
    data: Mapping[str, Any],
    question: Question,
    *,
    constraint: Constraint,
    measured: Measured,
    provider: str,
    model: str,
) -> ProviderAnswer:
    """The answer to ``question`` from a Chat Completions answer with logprobs. Raises
    :class:`~.errors.LogprobsMissing` when it carries none, :class:`~.errors.OptionLabelSplit`
    when the model's tokenizer split a label, :class:`~.errors.JudgmentFailed` when it names no
    option or none of the likeliest tokens is one."""
    asked = Asked(provider, model, question)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise asked.failed("the answer has no choices")
    logprobs = choices[0].get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not isinstance(content, list) or not content:
        raise asked.missing()
    labels = labels_for(question)
    renderings = {label: _rendering(label, constraint) for label in labels}
    opening = _opening(constraint)
    written = ""
    for token in content:
        before = written
        written += _squash(str(token.get("token", "")))
        start = _label_start(written, opening)
        if start is not None and len(written) > start:
            return _distribution(asked, renderings, opening, before, written, token, measured)
    raise asked.failed(f"the answer {written!r} stops before naming an option")


def _label_start(text: str, opening: str) -> int | None:
    """Where the label begins in ``text``: just after the first ``opening``; None before it."""
    found = text.find(opening)
    return None if found < 0 else found + len(opening)


def _matches(renderings: Mapping[str, str], text: str, opening: str) -> list[str]:
    """The labels whose rendering ``text`` has begun, past the opening."""
    start = _label_start(text, opening)
    if start is None or len(text) <= start:
        return list(renderings)  # not decisive: every option is still open
    rest = text[start:]
    return [label for label, r in renderings.items() if r.startswith(rest)]


def _distribution(
    asked: Asked,
    renderings: Mapping[str, str],
    opening: str,
    before: str,
    written: str,
    token: Mapping[str, Any],
    measured: Measured,
) -> ProviderAnswer:
    chosen = _matches(renderings, written, opening)
    if len(chosen) > 1:
        shown = ", ".join(chosen[:4]) + (", ..." if len(chosen) > 4 else "")
        raise asked.split(
            f"the model wrote {written!r}, only the beginning of the labels {shown}: it wrote a "
            "label in more than one token, so its first token does not decide"
        )
    if not chosen:
        raise asked.failed(
            f"the model wrote {written!r}, which is none of the labels "
            f"({', '.join(renderings)}): the server did not enforce the constraint"
        )
    alternatives = token.get("top_logprobs", token.get("top_probs"))
    if not isinstance(alternatives, list) or not alternatives:
        raise asked.missing()
    mass = dict.fromkeys(renderings, 0.0)
    for alternative in alternatives:
        matches = _matches(renderings, before + _squash(str(alternative.get("token", ""))), opening)
        if len(matches) == 1:
            mass[matches[0]] += _probability(alternative)
    coverage = math.fsum(mass.values())
    if coverage <= 0.0:
        raise asked.failed(
            "none of the model's likeliest tokens was an option (coverage 0, "
            f"{measured.replace('_', ' ')})",
            coverage=0.0,
        )
    keys = dict(zip(renderings, asked.question.keys, strict=True))
    return ProviderAnswer(
        {keys[label]: p / coverage for label, p in mass.items()}, min(coverage, 1.0), measured
    )
