"""The judgment seam, beside the model seam: one method, ``judge``.

A :class:`JudgmentProvider` is asked questions about a text and answers, per question, a
probability for each option key, the coverage (the share of the model's probability the
options held before they were renormalised to sum to 1) and where that was measured. It is
never called directly: :func:`ankka.runtime.declare.judgments.verify.ask` is the one place the
platform
calls a provider, and it checks every answer against the questions whoever the provider is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from ankka.runtime.declare.judgments.questions import Question
from ankka.runtime.records.messages import Usage

__all__ = ["Inquiry", "JudgmentProvider", "Measured", "ProviderAnswer", "ProviderJudgment"]

Measured = Literal["before_constraint", "after_constraint", "scripted"]
"""Where coverage was measured: on the model's distribution before the options were enforced
(the honest figure: how much the model itself wanted to pick an option), after (the constraint
already removed everything else, so coverage is near 1 by construction), or from a script."""


@dataclass(frozen=True, slots=True)
class Inquiry:
    """What is asked: the questions about ``text``, with optional ``instructions``."""

    text: str
    questions: tuple[Question, ...]
    instructions: str = ""


@dataclass(frozen=True, slots=True)
class ProviderAnswer:
    """A provider's answer to one question: probabilities per option key, already divided by
    ``coverage`` so they sum to 1 (the provider's stated normalisation)."""

    probabilities: Mapping[str, float]
    coverage: float
    measured: Measured


@dataclass(frozen=True, slots=True)
class ProviderJudgment:
    answers: Mapping[str, ProviderAnswer]
    usage: Usage = field(default_factory=Usage)
    model: str = ""


@runtime_checkable
class JudgmentProvider(Protocol):
    """One configured judgment model. ``name`` is the name the service gave it."""

    @property
    def name(self) -> str: ...

    async def judge(self, inquiry: Inquiry) -> ProviderJudgment: ...
