"""A process that lost an instance's lease records nothing more of it, so the process that
took the instance over never asks the model again for a call that was answered and recorded
(found by the delegation chaos run on PostgreSQL, docs/testing.md "Delegation under chaos").

Two task hosts on one PostgreSQL database, each with a store of its own, as two processes: A
works a task, and while its model call's answer is on its way A's lease runs out (A stalled
past it: the row's ``lease_until`` is set in the past, A renews only every 200 s here) and B
claims the instance and reads its session, then makes the same call. Without the fence A's
answer was recorded after B had read the session, and B then asked again a call whose answer
the store held. And a process whose lease was taken makes no model call for the instance: not
the retry of a call that failed while it paused."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from ankka.runtime.drivers.context import Context
from ankka.runtime.providers.base import ModelRequest, ModelResponse
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.messages import AssistantMessage
from ankka.runtime.store.open import Store
from examples.tasks import service as example
from tests.support.postgres import fresh_database
from tests.support.runtimes import make_context, task_host_for
from tests.unit.runtime.conftest import NO_PAUSE, put
from tests.unit.runtime.drivers.tasks.test_iteration import GOOD, complete
from tests.unit.runtime.drivers.tasks.test_round_trips import lookup

LONG = 600.0  # no renewal while the test runs: a lease runs out only when the test says


class Gated(ScriptedProvider):
    """One process's scripted model: ``before(n)`` and ``after(n)`` are awaited around its
    ``n``-th call (a stall before the request leaves, or before its answer is back)."""

    def __init__(
        self,
        script: list[dict[str, Any]],
        *,
        before: Callable[[int], Awaitable[None]],
        after: Callable[[int], Awaitable[None]],
    ) -> None:
        super().__init__(script, name="default")
        self._before, self._after, self.calls = before, after, 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        number = self.calls
        await self._before(number)
        answer = await super().complete(request)
        await self._after(number)
        return answer


async def _nothing(number: int) -> None:
    return None


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(3000):  # bounded: a broken runtime fails here rather than hanging
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


async def _answers_recorded(context: Context, session: str) -> int:
    entries = await context.journal.read(session)
    return sum(isinstance(e.record, AssistantMessage) for e in entries)


async def test_an_answer_recorded_after_the_lease_was_taken_is_refused(
    postgres_server: str,
) -> None:
    url = fresh_database(postgres_server, "fence")
    stores = [await Store.open(url), await Store.open(url)]
    answer_back = asyncio.Event()  # A's first answer reaches A
    a_asked, a_asked_more = asyncio.Event(), asyncio.Event()
    b_at_call, b_may_ask = asyncio.Event(), asyncio.Event()
    seen_by_b: list[int] = []  # at each of B's asks: the answers its session held then

    async def a_after(number: int) -> None:
        a_asked.set()
        await answer_back.wait()

    async def a_before(number: int) -> None:
        if number > 1:  # A went on working the task it lost: it stays here
            a_asked_more.set()
            await asyncio.Event().wait()

    async def b_before(number: int) -> None:
        if number == 1:
            b_at_call.set()
            await b_may_ask.wait()
        seen_by_b.append(await _answers_recorded(context_b, "task:t1"))

    gated_a = Gated([lookup(0)], before=a_before, after=a_after)
    gated_b = Gated([lookup(1), complete(GOOD)], before=b_before, after=_nothing)
    context_a = make_context(example, store=stores[0].journal_store, providers={"default": gated_a})
    context_b = make_context(example, store=stores[1].journal_store, providers={"default": gated_b})
    options: dict[str, Any] = {"retry": NO_PAUSE, "poll_seconds": 0.05, "lease_seconds": LONG}
    host_a = task_host_for(context_a, stores[0].tasks, **options)
    host_b = task_host_for(context_b, stores[1].tasks, **options)
    try:
        async with context_a, host_a:
            record = await put(host_a, "t1")
            key = ("researcher", record.instance or "")
            await asyncio.wait_for(a_asked.wait(), 30)
            # A stalls past its lease while the answer is on its way.
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("UPDATE ankka_instances SET lease_until = 0")
            async with context_b, host_b:
                # B takes the instance over, reads its (empty) session and is at its call.
                await asyncio.wait_for(b_at_call.wait(), 30)
                answer_back.set()
                # A records its answer, or is refused: either way it is done with it.
                await _until(
                    lambda: key not in host_a._workers or a_asked_more.is_set(),
                    "A recorded its answer or stopped",
                )
                b_may_ask.set()
                await _until(lambda: bool(seen_by_b), "B asked")
                # No call is made whose answer the store holds: B's first ask found none.
                assert seen_by_b[0] == 0, "B asked again for an answer A recorded after B read"
                assert not a_asked_more.is_set(), "A went on working an instance it lost"
                finished = await host_b.wait("t1", 30)
                assert finished.state.value == "completed", finished
                assert seen_by_b == [0, 1], seen_by_b
                assert await _answers_recorded(context_b, "task:t1") == 2
    finally:
        for store in stores:
            await store.close()


async def test_a_failed_call_is_not_made_again_once_the_lease_was_taken(
    postgres_server: str,
) -> None:
    """A's model call fails (the model is unavailable) and, while A pauses before trying
    again, its lease runs out and B works the task to its end: A does not ask again."""
    url = fresh_database(postgres_server, "fence")
    stores = [await Store.open(url), await Store.open(url)]
    pausing, may_go_on = asyncio.Event(), asyncio.Event()

    async def pause(seconds: float) -> None:  # A's pause before its next attempt
        pausing.set()
        await may_go_on.wait()

    gated_a = Gated([{"status": 503}, lookup(0), complete(GOOD)], before=_nothing, after=_nothing)
    gated_b = Gated([lookup(1), complete(GOOD)], before=_nothing, after=_nothing)
    context_a = make_context(example, store=stores[0].journal_store, providers={"default": gated_a})
    context_b = make_context(example, store=stores[1].journal_store, providers={"default": gated_b})
    options: dict[str, Any] = {"poll_seconds": 0.05, "lease_seconds": LONG}
    host_a = task_host_for(context_a, stores[0].tasks, sleep=pause, **options)
    host_b = task_host_for(context_b, stores[1].tasks, retry=NO_PAUSE, **options)
    try:
        async with context_a, host_a:
            record = await put(host_a, "t1")
            key = ("researcher", record.instance or "")
            await asyncio.wait_for(pausing.wait(), 30)
            with psycopg.connect(url, autocommit=True) as conn:  # A stalls past its lease
                conn.execute("UPDATE ankka_instances SET lease_until = 0")
            async with context_b, host_b:
                finished = await host_b.wait("t1", 30)
                assert finished.state.value == "completed", finished
                may_go_on.set()
                await _until(
                    lambda: key not in host_a._workers or gated_a.calls > 1, "A stopped or asked"
                )
                assert gated_a.calls == 1, "A asked again a call of a task B had worked to its end"
    finally:
        for store in stores:
            await store.close()
