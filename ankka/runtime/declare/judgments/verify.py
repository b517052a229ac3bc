"""The one place the platform calls a judgment provider, and checks what it answered.

:func:`ask` calls ``provider.judge`` and verifies the answer against the questions whoever the
provider is: every question answered and nothing else, every option key of the question and
no other, each probability a number in [0, 1], the probabilities summing to 1 within
:data:`TOLERANCE` (providers divide by the coverage; see :class:`~.seam.ProviderAnswer`), the
coverage in [0, 1] and at least the floor. A provider's mistake and a coverage under the floor
are both :class:`~.errors.JudgmentFailed`: never a silently renormalised answer.
"""

from __future__ import annotations

import math

from ankka.runtime.declare.judgments.errors import JudgmentFailed
from ankka.runtime.declare.judgments.judgment import Answer, Judgment
from ankka.runtime.declare.judgments.questions import Question
from ankka.runtime.declare.judgments.seam import Inquiry, JudgmentProvider, ProviderAnswer

__all__ = ["DEFAULT_COVERAGE_FLOOR", "TOLERANCE", "ask", "verify_answer"]

DEFAULT_COVERAGE_FLOOR = 0.5
TOLERANCE = 1e-3


async def ask(
    provider: JudgmentProvider, inquiry: Inquiry, *, floor: float = DEFAULT_COVERAGE_FLOOR
) -> Judgment:
    """Ask ``provider`` and return the verified :class:`Judgment`."""
    answered = await provider.judge(inquiry)
    asked = {q.id for q in inquiry.questions}
    extra = sorted(set(answered.answers) - asked)
    if extra:
        raise JudgmentFailed(
            provider.name,
            f"it answered question(s) that were not asked: {', '.join(map(repr, extra))}",
            question=extra[0],
        )
    answers: dict[str, Answer] = {}
    try:
        for question in inquiry.questions:
            given = answered.answers.get(question.id)
            if given is None:
                raise JudgmentFailed(
                    provider.name,
                    f"it gave no answer to question {question.id!r}",
                    question=question.id,
                )
            answers[question.id] = verify_answer(provider.name, question, given, floor=floor)
    except JudgmentFailed as exc:
        exc.usage = answered.usage  # the tokens were spent all the same
        raise
    return Judgment(answers, answered.usage, provider.name, answered.model)


def verify_answer(
    provider: str, question: Question, given: ProviderAnswer, *, floor: float
) -> Answer:
    """One answer checked against its question; the probabilities in the declared order."""
    where = f"question {question.id!r}"

    def fail(detail: str, coverage: float | None = None) -> JudgmentFailed:
        return JudgmentFailed(
            provider, f"{where}: {detail}", coverage=coverage, question=question.id
        )

    keys = question.keys
    unknown = sorted(set(given.probabilities) - set(keys))
    if unknown:
        raise fail(
            f"unknown option key(s) {', '.join(map(repr, unknown))} (the keys are "
            f"{', '.join(keys)})"
        )
    missing = [k for k in keys if k not in given.probabilities]
    if missing:
        raise fail(f"no probability for option key(s) {', '.join(map(repr, missing))}")
    ordered: dict[str, float] = {}
    for key in keys:
        p = given.probabilities[key]
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
            raise fail(f"the probability of {key!r} is {p!r}, not a number in [0, 1]")
        ordered[key] = float(p)
    total = math.fsum(ordered.values())
    if abs(total - 1.0) > TOLERANCE:
        raise fail(f"the probabilities sum to {total:.6f}, not 1 (within {TOLERANCE:g})")
    coverage = given.coverage
    if isinstance(coverage, bool) or not isinstance(coverage, int | float):
        raise fail(f"the coverage is {coverage!r}, not a number")
    if not 0.0 <= coverage <= 1.0 + TOLERANCE:
        raise fail(f"the coverage is {coverage!r}, not in [0, 1]")
    if coverage < floor:
        raise fail(
            f"the options held {coverage:.1%} of the model's probability "
            f"({given.measured.replace('_', ' ')}), under the floor of {floor:.0%}: the model "
            "did not take the question as one to answer with these options",
            coverage=float(coverage),
        )
    return Answer(question.id, question.kind, ordered, min(float(coverage), 1.0), given.measured)
