"""The effect a judgment handler returns: a :class:`JudgmentPlan`.

A judgment handler is declared on a service like an agent and called the same way: it is given
the request (:class:`JudgmentRequest`) and returns a description, doing no I/O::

    @service.judgment("triage")
    def triage(request: JudgmentRequest) -> JudgmentPlan:
        return JudgmentPlan(text=request.text, questions=(URGENT, TEAM), model="default")

The platform asks the plan's questions of the judgment provider of ``model`` (through
:func:`~.verify.ask`) and answers the verified probabilities with their coverage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.judgments.questions import Question, check_questions
from ankka.runtime.declare.judgments.seam import Inquiry
from ankka.runtime.declare.judgments.verify import DEFAULT_COVERAGE_FLOOR

__all__ = ["JudgmentDeclaration", "JudgmentHandler", "JudgmentPlan", "JudgmentRequest"]


@dataclass(frozen=True, slots=True)
class JudgmentRequest:
    """What a judgment handler is given: its name and the text to judge."""

    handler: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgmentPlan:
    """Which questions to ask about which text, of which model, with what coverage floor."""

    text: str
    questions: Sequence[Question]
    instructions: str = ""
    model: str = "default"
    coverage_floor: float = DEFAULT_COVERAGE_FLOOR

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "questions", check_questions(self.questions, where="a judgment plan")
        )
        if not 0.0 <= self.coverage_floor <= 1.0:
            raise ConfigurationError(
                f"coverage_floor is {self.coverage_floor!r}; it is a share in [0, 1]"
            )
        if not self.text.strip():
            raise ConfigurationError("a judgment plan needs a text to judge; it is empty")

    def inquiry(self) -> Inquiry:
        return Inquiry(self.text, tuple(self.questions), self.instructions)


JudgmentHandler = Callable[[JudgmentRequest], JudgmentPlan]


@dataclass(frozen=True, slots=True)
class JudgmentDeclaration:
    name: str
    handler: JudgmentHandler
    description: str = field(default="")
