"""A service for the integration tests: the weather example plus one agent of each shape."""

from __future__ import annotations

from pydantic import BaseModel

from ankka.runtime.agents import Service, Turn, TurnRequest
from ankka.runtime.guardrails import Guardrail
from ankka.runtime.judgments import YesNo, refuse_if_yes
from ankka.runtime.tasks import Accepts, AutonomousAgent
from examples.tasks import summary
from examples.weather import get_weather, service


class Forecast(BaseModel):
    city: str
    celsius: float


def _no_shouting(text: str) -> str | None:
    return "please do not shout" if text.isupper() else None


@service.agent("streamer")
def streamer(request: TurnRequest) -> Turn:
    return Turn(message=request.message, tools=[get_weather], answer="stream")


@service.agent("typed")
def typed(request: TurnRequest) -> Turn:
    return Turn(message=request.message, answer=Forecast)


@service.agent("polite")
def polite(request: TurnRequest) -> Turn:
    return Turn(message=request.message, input_guardrails=[Guardrail("no_shouting", _no_shouting)])


# Refuses nearly anything: P(yes) of any real model clears so low a bar. Its judgment model is
# "judge", configured apart from the default so a test can take it down on its own.
_ANYTHING = refuse_if_yes(
    YesNo("mentions_anything", "Does the message mention anything at all?"),
    at_least=1e-9,
    reason="the judge saw something",
    model="judge",
    coverage_floor=0.05,  # SmolLM2 holds 20-40 % on this question: the test is not about that
)


@service.agent("guarded")
def guarded(request: TurnRequest) -> Turn:
    return Turn(message=request.message, input_guardrails=[_ANYTHING])


# The schemathesis target: every agent above but the judged one. Its judge must be a model
# that returns logprobs, which the stand-in is not, and a judged guardrail without a judge is
# a configuration error answered 500 by design (docs/judgments.md).
unjudged = Service("integration-unjudged")
for _name, _declared in service.agents.items():
    if _name != "guarded":
        unjudged.agent(_name, description=_declared.description)(_declared.handler)
# And an autonomous agent, so the task routes and their streams are generated against too (a
# budget of 2: a task the stand-in's text never completes fails soon).
unjudged.autonomous(AutonomousAgent(name="researcher", accepts=[Accepts(summary, budget=2)]))

__all__ = ["service", "unjudged"]
