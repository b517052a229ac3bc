"""The per-Agent lock: one reconcile of an Agent at a time, and no lock kept once unused."""

from __future__ import annotations

import asyncio

from kubernetes import client as k8s_client

from ankka.operator.kube import Kube
from ankka.operator.reconcile import Platform
from ankka.operator.settings import Settings


def platform() -> Platform:
    # No request is made: the lock is the platform's own.
    return Platform(Kube(k8s_client.ApiClient(), field_manager="test"), Settings())


async def test_reconciles_of_one_agent_run_one_at_a_time_and_leave_no_lock() -> None:
    p = platform()
    inside: list[str] = []
    most = 0
    go = asyncio.Event()

    async def reconcile(name: str, tag: str) -> None:
        nonlocal most
        async with p.lock("shop", name):
            inside.append(tag)
            most = max(most, sum(1 for t in inside if t.startswith(name)))
            await go.wait()
            await asyncio.sleep(0)
            inside.remove(tag)

    tasks = [asyncio.create_task(reconcile("cart", f"cart{i}")) for i in range(3)]
    tasks.append(asyncio.create_task(reconcile("till", "till0")))
    await asyncio.sleep(0)
    assert sorted(inside) == ["cart0", "till0"]  # another Agent's reconcile is not held up
    assert p.locks_in_use() == 2
    go.set()
    await asyncio.gather(*tasks)
    assert most == 1
    assert p.locks_in_use() == 0  # a deleted Agent, never reconciled again, keeps none
    p.kube.close()


async def test_a_cancelled_waiter_neither_leaks_the_lock_nor_lets_a_second_holder_in() -> None:
    p = platform()
    go = asyncio.Event()
    holders: list[str] = []

    async def hold(tag: str) -> None:
        async with p.lock("shop", "cart"):
            holders.append(tag)
            await go.wait()
            holders.remove(tag)

    first = asyncio.create_task(hold("first"))
    waiter = asyncio.create_task(hold("waiter"))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.sleep(0)
    third = asyncio.create_task(hold("third"))
    await asyncio.sleep(0)
    assert holders == ["first"]  # the third waits on the same lock, not a fresh one
    go.set()
    await asyncio.gather(first, third, waiter, return_exceptions=True)
    assert waiter.cancelled()
    assert p.locks_in_use() == 0
    p.kube.close()
