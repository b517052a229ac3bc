"""The kube seam lets requests in by priority: releases before status patches before Events."""

from __future__ import annotations

import asyncio

from ankka.operator.kube import BACKGROUND, FIRST, LATER, _Gate


async def _hold(gate: _Gate, priority: int, name: str, order: list[str], go: asyncio.Event) -> None:
    async with gate.slot(priority):
        order.append(name)
        await go.wait()


async def test_waiters_are_let_in_by_priority_then_by_arrival() -> None:
    gate = _Gate(1)
    order: list[str] = []
    go = asyncio.Event()
    holder = asyncio.create_task(_hold(gate, FIRST, "holder", order, go))
    await asyncio.sleep(0)
    waiters = [
        asyncio.create_task(_hold(gate, priority, name, order, go))
        for priority, name in [
            (BACKGROUND, "event"),
            (LATER, "status"),
            (FIRST, "deployment"),
            (FIRST, "service"),
        ]
    ]
    await asyncio.sleep(0)
    go.set()
    await asyncio.gather(holder, *waiters)
    assert order == ["holder", "deployment", "service", "status", "event"]


async def test_a_cancelled_waiter_takes_no_slot() -> None:
    gate = _Gate(1)
    order: list[str] = []
    go = asyncio.Event()
    holder = asyncio.create_task(_hold(gate, FIRST, "holder", order, go))
    await asyncio.sleep(0)
    gone = asyncio.create_task(_hold(gate, FIRST, "gone", order, go))
    later = asyncio.create_task(_hold(gate, LATER, "later", order, go))
    await asyncio.sleep(0)
    gone.cancel()
    go.set()
    await asyncio.gather(holder, later)
    assert gone.cancelled()
    assert order == ["holder", "later"]
    async with gate.slot(FIRST):  # every slot came back
        pass
