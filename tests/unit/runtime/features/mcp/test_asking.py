"""Which call a server's question during a call belongs to (``InFlight``)."""

from __future__ import annotations

from typing import Any

from ankka.runtime.features.mcp.asking import Answer, Call, InFlight, Question, Sampled
from ankka.runtime.records.registry import Record


class _Asker:
    records: list[Record]

    def __init__(self) -> None:
        self.records = []

    async def elicit(self, question: Question) -> Answer:
        return Answer("cancel")

    async def sample(self, server: str, system: str | None, messages: Any, max_tokens: int) -> Any:
        return Sampled(None)


def test_the_one_call_in_flight_is_the_one_that_asked() -> None:
    call = Call(_Asker(), "mcp__catalog__buy", "c1")
    assert InFlight([call]).only() is call
    assert InFlight([]).only() is None


def test_several_calls_in_flight_cannot_say_which_asked_even_of_one_turn() -> None:
    turn = _Asker()
    first, second = Call(turn, "mcp__catalog__buy", "c1"), Call(turn, "mcp__catalog__find", "c2")
    # One turn's two calls: the question would name (and hold open the deadline of) a call
    # that may not have asked; no call is chosen, in either order.
    assert InFlight([first, second]).only() is None
    assert InFlight([second, first]).only() is None
    assert InFlight([first, Call(_Asker(), "mcp__catalog__buy", "c3")]).only() is None
