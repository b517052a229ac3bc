"""The scripted judgment provider, for tests: answers from a script, fails loudly.

    judge = ScriptedJudgmentProvider({
        "urgent": {"yes": 0.9, "no": 0.1},           # probabilities
        "team": "billing",                          # certain: probability 1 for that key
        "tone": [{"probabilities": {"0": 0.2, "1": 0.8}, "coverage": 0.4}, "1"],  # in turn
    })

A question with no scripted answer (or whose answers ran out) raises
:class:`~.errors.JudgmentScriptFailed` at once, naming the question. It is not a
:class:`~.errors.JudgmentFailed` on purpose: a test that added a question and forgot its
answer must fail now, not be taken for an outage. :meth:`fail_next` is how a test produces a
real ``JudgmentFailed``; each call queues exactly one. Answers pass through the platform's
verification like any provider's, so a scripted answer that does not fit its question fails
as a real model's would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ankka.runtime.declare.judgments.errors import JudgmentFailed, JudgmentScriptFailed
from ankka.runtime.declare.judgments.questions import Question
from ankka.runtime.declare.judgments.seam import Inquiry, ProviderAnswer, ProviderJudgment
from ankka.runtime.records.messages import Usage

__all__ = ["ScriptedJudgmentProvider"]

ScriptEntry = str | Mapping[str, Any]


class ScriptedJudgmentProvider:
    def __init__(
        self,
        script: Mapping[str, ScriptEntry | Sequence[ScriptEntry]],
        *,
        name: str = "scripted-judge",
        usage: Usage | None = None,
    ) -> None:
        self._name = name
        self._usage = usage or Usage()
        self._script: dict[str, list[ScriptEntry]] = {
            q: list(v) if isinstance(v, list | tuple) else [v]  # type: ignore[list-item]
            for q, v in script.items()
        }
        self._repeat = {q: not isinstance(v, list | tuple) for q, v in script.items()}
        self._asked: dict[str, int] = {}
        self._failures: list[str] = []
        self.inquiries: list[Inquiry] = []

    @property
    def name(self) -> str:
        return self._name

    def fail_next(self, detail: str = "a failure queued by fail_next()") -> None:
        """Make the next call raise one real :class:`JudgmentFailed`, then answer again."""
        self._failures.append(detail)

    async def judge(self, inquiry: Inquiry) -> ProviderJudgment:
        self.inquiries.append(inquiry)
        if self._failures:
            raise JudgmentFailed(self._name, self._failures.pop(0))
        answers = {q.id: self._answer(q) for q in inquiry.questions}
        return ProviderJudgment(answers, self._usage, "scripted")

    def _answer(self, question: Question) -> ProviderAnswer:
        entries = self._script.get(question.id)
        if entries is None:
            scripted = ", ".join(sorted(self._script)) or "none"
            raise JudgmentScriptFailed(
                f"the judgment script has no answer for question {question.id!r} "
                f"(it answers: {scripted}); add one to the script",
                question=question.id,
            )
        served = self._asked.get(question.id, 0)
        if served >= len(entries) and not self._repeat[question.id]:
            raise JudgmentScriptFailed(
                f"question {question.id!r} was asked {served + 1} times but the judgment "
                f"script has {len(entries)} answer(s) for it",
                question=question.id,
            )
        self._asked[question.id] = served + 1
        return _parse(question, entries[min(served, len(entries) - 1)])


def _parse(question: Question, entry: ScriptEntry) -> ProviderAnswer:
    if isinstance(entry, str):
        if entry not in question.keys:
            raise JudgmentScriptFailed(
                f"the judgment script answers question {question.id!r} with {entry!r}, which "
                f"is not one of its keys ({', '.join(question.keys)})",
                question=question.id,
            )
        return ProviderAnswer({k: float(k == entry) for k in question.keys}, 1.0, "scripted")
    if "probabilities" in entry:
        probabilities = dict(entry["probabilities"])
        return ProviderAnswer(probabilities, float(entry.get("coverage", 1.0)), "scripted")
    return ProviderAnswer(dict(entry), 1.0, "scripted")
