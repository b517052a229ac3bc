"""Which call a server's question during a call belongs to (``InFlight``), and why a turn's
questions left unanswered are closed as it leaves :func:`asking` (the path of every driver)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ankka._kernel.errors import TurnFailed
from ankka.runtime.features.mcp.asking import (
    ASKING,
    Answer,
    Call,
    InFlight,
    Question,
    Sampled,
    asking,
)
from ankka.runtime.records.registry import Record


class _Asker:
    records: list[Record]

    def __init__(self) -> None:
        self.records = []
        self.closed: list[str] = []

    async def elicit(self, question: Question) -> Answer:
        return Answer("cancel")

    async def sample(self, server: str, system: str | None, messages: Any, max_tokens: int) -> Any:
        return Sampled(None)

    async def close(self, reason: str) -> None:
        self.closed.append(reason)


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


async def test_a_turn_that_ends_closes_its_questions_saying_so() -> None:
    turn = _Asker()
    async with asking(turn):
        assert ASKING.get() is turn
    assert ASKING.get() is None
    assert turn.closed == ["the turn that asked ended before it was answered"]


async def test_a_turn_that_fails_closes_its_questions_naming_the_failure() -> None:
    turn = _Asker()
    with pytest.raises(TurnFailed):
        async with asking(turn):
            raise TurnFailed("the model answered nothing")
    assert turn.closed == ["the turn that asked failed (turn_failed) before it was answered"]


async def test_a_cancelled_turn_closes_its_questions_and_stays_cancelled() -> None:
    turn = _Asker()
    entered = asyncio.Event()

    async def run() -> None:
        async with asking(turn):
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(run())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert turn.closed == ["the turn that asked was cancelled before it was answered"]


async def test_a_calls_deadline_stops_while_its_questions_wait_and_goes_on_with_what_was_left() -> (
    None
):
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(60) as deadline:
        call = Call(_Asker(), "mcp__catalog__buy", "c1", deadline)
        call.hold()
        call.hold()  # a second question of the same call, while the first waits
        assert deadline.when() is None
        call.release()
        assert deadline.when() is None  # one still waits
        call.release()
        when = deadline.when()
        # All of it again (nothing was spent): not rescheduled to now, nor past the 60 s.
        assert when is not None and loop.time() + 59 < when <= loop.time() + 60
        await asyncio.sleep(0)  # the call's answer


async def test_a_deadline_held_after_part_of_it_was_spent_goes_on_with_the_rest() -> None:
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(60) as deadline:
        call = Call(_Asker(), "mcp__catalog__buy", "c1", deadline)
        deadline.reschedule(loop.time() + 20)  # as if 40 s of the server's time had gone
        call.hold()
        assert deadline.when() is None
        call.release()
        when = deadline.when()
        assert when is not None and loop.time() + 19 < when <= loop.time() + 20
        await asyncio.sleep(0)  # the call's answer
