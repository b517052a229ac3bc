"""A :class:`Judgment`: verified answers stored by question id, typed at the read.

    judgment.choice("team")     # ChoiceReading(key="billing", probability=0.71, ...)
    judgment.yes_no("urgent")   # YesNoReading(yes=0.83, no=0.17); .answer is True
    judgment.score("tone")      # ScoreReading(level=3, ..., expected=2.6)

Reading a question the judgment does not hold, or as the wrong kind, is a
:class:`~.errors.JudgmentReadError` naming what it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ankka.runtime.declare.judgments.errors import JudgmentReadError
from ankka.runtime.declare.judgments.questions import QuestionKind
from ankka.runtime.declare.judgments.seam import Measured
from ankka.runtime.records.messages import Usage

__all__ = ["Answer", "ChoiceReading", "Judgment", "ScoreReading", "YesNoReading"]


@dataclass(frozen=True, slots=True)
class Answer:
    """One verified answer: a probability per option key (in declared order), the coverage."""

    question: str
    kind: QuestionKind
    probabilities: Mapping[str, float]
    coverage: float
    measured: Measured

    @property
    def best(self) -> tuple[str, float]:
        key = max(self.probabilities, key=lambda k: self.probabilities[k])
        return key, self.probabilities[key]

    def as_dict(self) -> dict[str, Any]:
        return {
            "probabilities": dict(self.probabilities),
            "coverage": self.coverage,
            "measured": self.measured,
        }


@dataclass(frozen=True, slots=True)
class ChoiceReading:
    key: str
    probability: float
    probabilities: Mapping[str, float]
    coverage: float


@dataclass(frozen=True, slots=True)
class YesNoReading:
    yes: float
    no: float
    coverage: float

    @property
    def answer(self) -> bool:
        return self.yes >= self.no


@dataclass(frozen=True, slots=True)
class ScoreReading:
    level: int
    probability: float
    expected: float
    probabilities: Mapping[int, float]
    coverage: float


@dataclass(frozen=True, slots=True)
class Judgment:
    """The answers of one judgment and the tokens it took."""

    answers: Mapping[str, Answer]
    usage: Usage = field(default_factory=Usage)
    provider: str = ""
    model: str = ""

    def answer(self, question: str, kind: QuestionKind | None = None) -> Answer:
        found = self.answers.get(question)
        if found is None:
            held = ", ".join(sorted(self.answers)) or "none"
            raise JudgmentReadError(
                f"the judgment holds no answer to question {question!r} (it holds: {held})"
            )
        if kind is not None and found.kind != kind:
            raise JudgmentReadError(
                f"question {question!r} is a {found.kind} question, not a {kind} question"
            )
        return found

    def choice(self, question: str) -> ChoiceReading:
        found = self.answer(question, "choice")
        key, p = found.best
        return ChoiceReading(key, p, found.probabilities, found.coverage)

    def yes_no(self, question: str) -> YesNoReading:
        found = self.answer(question, "yes_no")
        return YesNoReading(found.probabilities["yes"], found.probabilities["no"], found.coverage)

    def score(self, question: str) -> ScoreReading:
        found = self.answer(question, "score")
        levels = {int(k): p for k, p in found.probabilities.items()}
        level = max(levels, key=lambda k: levels[k])
        expected = sum(k * p for k, p in levels.items())
        return ScoreReading(level, levels[level], expected, levels, found.coverage)

    def as_dict(self) -> dict[str, Any]:
        return {
            "answers": {q: a.as_dict() for q, a in self.answers.items()},
            "usage": self.usage.as_dict(),
        }
