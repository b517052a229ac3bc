"""Judged guardrails: a guardrail that asks a question and refuses on a rule.

    no_abuse = refuse_if_yes(
        YesNo("abusive", "Is the message abusive or threatening?"),
        at_least=0.8,
        reason="the message reads as abusive",
    )
    Turn(message=..., input_guardrails=[no_abuse])

It is run by the one function every loop runs guardrails through
(:func:`ankka.runtime.declare.guardrails.first_refusal`), which hands it the service's judgment
providers and a :class:`Judging` that counts the tokens it spent (the session's judgment
usage). A provider that fails has refused nothing and passed nothing: the guardrail raises
:class:`~.errors.GuardrailCheckFailed` (the request loop answers 503, 504 on a timeout, 500
with no provider at all), never a refusal and never a pass. A scripted provider's
:class:`~.errors.JudgmentScriptFailed` is a test's mistake and goes through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ankka._kernel.errors import AnkkaError, ConfigurationError
from ankka._kernel.model_names import find_model
from ankka.runtime.declare.judgments.errors import (
    GuardrailCheckFailed,
    JudgmentFailed,
    JudgmentScriptFailed,
)
from ankka.runtime.declare.judgments.judgment import Judgment
from ankka.runtime.declare.judgments.questions import Question, YesNo
from ankka.runtime.declare.judgments.seam import Inquiry, JudgmentProvider
from ankka.runtime.declare.judgments.verify import DEFAULT_COVERAGE_FLOOR, ask
from ankka.runtime.records.messages import Usage

__all__ = ["JudgedGuardrail", "Judging", "decide", "refuse_if_yes"]

Rule = Callable[[Judgment], "str | None"]


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgedGuardrail:
    """Ask ``question`` about the text of ``model``'s judgment provider; ``rule`` returns a
    reason to refuse, or None to pass."""

    name: str
    question: Question
    rule: Rule
    model: str = "default"
    instructions: str = ""
    coverage_floor: float = DEFAULT_COVERAGE_FLOOR


def refuse_if_yes(
    question: YesNo,
    *,
    at_least: float,
    reason: str,
    name: str | None = None,
    model: str = "default",
    coverage_floor: float = DEFAULT_COVERAGE_FLOOR,
) -> JudgedGuardrail:
    """Refuse when P(yes) ≥ ``at_least``."""
    if not 0.0 < at_least <= 1.0:
        raise ConfigurationError(f"refuse_if_yes: at_least is {at_least!r}, not in (0, 1]")

    def rule(judgment: Judgment) -> str | None:
        p = judgment.yes_no(question.id).yes
        return f"{reason} (P(yes) = {p:.2f} ≥ {at_least:g})" if p >= at_least else None

    return JudgedGuardrail(
        name=name or question.id,
        question=question,
        rule=rule,
        model=model,
        coverage_floor=coverage_floor,
    )


@dataclass(slots=True)
class Judging:
    """What judged guardrails are given for one turn: the service's judgment providers, and
    the tokens spent, counted as the session's judgment usage."""

    providers: Mapping[str, JudgmentProvider]
    spent: list[Usage] = field(default_factory=list)

    @property
    def usage(self) -> Usage:
        total = Usage()
        for usage in self.spent:
            total = total + usage
        return total


async def decide(rail: JudgedGuardrail, text: str, judging: Judging | None) -> str | None:
    """The rail's verdict: a reason to refuse, or None. Raises when it cannot decide."""
    provider = find_model(judging.providers, rail.model) if judging is not None else None
    if judging is None or provider is None:
        configured = ", ".join(sorted(judging.providers)) if judging else "none"
        raise GuardrailCheckFailed(
            rail.name,
            f"there is no judgment provider for model {rail.model!r} (configured: "
            f"{configured or 'none'})",
            cause=None,
        )
    inquiry = Inquiry(text, (rail.question,), rail.instructions)
    try:
        judgment = await ask(provider, inquiry, floor=rail.coverage_floor)
    except JudgmentScriptFailed:
        raise
    except AnkkaError as exc:
        spent = exc.usage if isinstance(exc, JudgmentFailed) else None
        if spent is not None:
            judging.spent.append(spent)
        raise GuardrailCheckFailed(rail.name, str(exc), cause=exc) from exc
    judging.spent.append(judgment.usage)
    return rail.rule(judgment)
