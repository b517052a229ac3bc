"""Judgments: typed questions answered with a probability per option, from a model's logprobs.

A judgment is the second thing a service asks a model for: a choice, a score or a yes/no about
a text, answered by a model that writes no prose. Modules, from the values up:

- :mod:`.questions` (the question values), :mod:`.judgment` (verified answers, typed reads)
- :mod:`.seam` (``JudgmentProvider``, one method), :mod:`.verify` (``ask``: the one place a
  provider is called and its answer checked), :mod:`.errors`
- :mod:`.logprobs` (pure: labels, request, reading the decisive token) and
  :mod:`.logprob_provider` (its I/O), :mod:`.registry` (a judge per configured model)
- :mod:`.scripted` (the test double), :mod:`.plan` (a judgment handler's effect),
  :mod:`.guardrail` (judged guardrails), :mod:`.usage` (the journal record of their tokens)
"""

from __future__ import annotations

from ankka.runtime.judgments.errors import (
    GuardrailCheckFailed,
    JudgmentFailed,
    JudgmentReadError,
    JudgmentScriptFailed,
    LogprobsMissing,
    OptionLabelSplit,
)
from ankka.runtime.judgments.guardrail import JudgedGuardrail, refuse_if_yes
from ankka.runtime.judgments.judgment import Answer, Judgment
from ankka.runtime.judgments.plan import JudgmentPlan, JudgmentRequest
from ankka.runtime.judgments.questions import Choice, Option, Question, Score, YesNo
from ankka.runtime.judgments.scripted import ScriptedJudgmentProvider
from ankka.runtime.judgments.seam import Inquiry, JudgmentProvider, ProviderAnswer, ProviderJudgment
from ankka.runtime.judgments.verify import DEFAULT_COVERAGE_FLOOR, ask

__all__ = [
    "DEFAULT_COVERAGE_FLOOR",
    "Answer",
    "Choice",
    "GuardrailCheckFailed",
    "Inquiry",
    "JudgedGuardrail",
    "Judgment",
    "JudgmentFailed",
    "JudgmentPlan",
    "JudgmentProvider",
    "JudgmentReadError",
    "JudgmentRequest",
    "JudgmentScriptFailed",
    "LogprobsMissing",
    "Option",
    "OptionLabelSplit",
    "ProviderAnswer",
    "ProviderJudgment",
    "Question",
    "Score",
    "ScriptedJudgmentProvider",
    "YesNo",
    "ask",
    "refuse_if_yes",
]
