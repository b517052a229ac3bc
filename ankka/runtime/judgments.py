"""Judgments: typed questions answered with a probability per option, from a model's logprobs.

A judgment is the second thing a service asks a model for: a choice, a score or a yes/no about
a text, answered by a model that writes no prose. Where the parts live:

- ``declare/judgments/``: the question values, verified answers and typed reads, the
  ``JudgmentProvider`` seam, ``ask`` (the one place a provider is called and its answer
  checked), a judgment handler's plan, judged guardrails, the errors;
- ``providers/``: ``logprobs`` (pure: labels, request, the decisive token),
  ``logprob_judge`` (its I/O over a model's own transport), ``judges`` (a judge per
  configured model), ``scripted_judgments`` (the test double);
- ``records/judgments``: the journal record of their tokens.

A public module: the path users import (README, examples, docs). It re-exports from the rooms
below ``ankka.runtime`` and nothing inside the rooms imports it (.importlinter: the runtime's
layers).
"""

from __future__ import annotations

from ankka.runtime.declare.judgments.errors import (
    GuardrailCheckFailed,
    JudgmentFailed,
    JudgmentReadError,
    JudgmentScriptFailed,
    LogprobsMissing,
    OptionLabelSplit,
)
from ankka.runtime.declare.judgments.guardrail import JudgedGuardrail, refuse_if_yes
from ankka.runtime.declare.judgments.judgment import Answer, Judgment
from ankka.runtime.declare.judgments.plan import JudgmentPlan, JudgmentRequest
from ankka.runtime.declare.judgments.questions import Choice, Option, Question, Score, YesNo
from ankka.runtime.declare.judgments.seam import (
    Inquiry,
    JudgmentProvider,
    ProviderAnswer,
    ProviderJudgment,
)
from ankka.runtime.declare.judgments.verify import DEFAULT_COVERAGE_FLOOR, ask
from ankka.runtime.providers.scripted_judgments import ScriptedJudgmentProvider

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
