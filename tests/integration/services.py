"""A service for the integration tests: the weather example plus one agent of each shape."""

from __future__ import annotations

from pydantic import BaseModel

from ankka.runtime.agents import Turn, TurnRequest
from ankka.runtime.guardrails import Guardrail
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


__all__ = ["service"]
