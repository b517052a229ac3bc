"""The models file is rendered single-flight: calls made during a render share the next one."""

from __future__ import annotations

import asyncio

from ankka.operator.reconcile import _Coalesced


async def test_calls_during_a_run_share_the_next_run_and_each_waits_for_one_begun_after_it() -> (
    None
):
    once = _Coalesced()
    runs: list[int] = []
    release = asyncio.Event()

    async def job() -> None:
        runs.append(len(runs))
        await release.wait()

    first = asyncio.create_task(once.run(job))
    await asyncio.sleep(0)
    assert runs == [0]
    during = [asyncio.create_task(once.run(job)) for _ in range(5)]
    await asyncio.sleep(0)
    assert runs == [0]  # none starts while the first runs
    release.set()
    await asyncio.gather(first, *during)
    assert runs == [0, 1]  # the five shared one run, begun after they asked
    await once.run(job)
    assert runs == [0, 1, 2]  # a later call runs again
