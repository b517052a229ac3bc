"""A resumed turn journals each model call as its answer returns, before the next step; a
record the store refuses is logged and the turn goes on, its calls accounted at its end."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ankka._kernel.clock import ManualClock
from ankka._kernel.errors import StoreError
from ankka.runtime.drivers.approvals import Decided
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.approvals import ResumedCall
from ankka.runtime.records.messages import AssistantMessage
from ankka.runtime.records.registry import Record
from ankka.runtime.store.journal_store import JournalStore, SharedSessionLock
from ankka.runtime.store.readable import Cursor, Readers
from tests.support.runtimes import runtime_for
from tests.support.stores import OwnedJournalStore, journal_store
from tests.unit.runtime.drivers.test_approvals import START, refund_call, service


class RefusingResumedCalls:
    """A journal store that refuses every batch holding a resumed call (as a full disk)."""

    def __init__(self, inner: JournalStore) -> None:
        self.inner = inner

    async def append(
        self, session: str, events: Sequence[tuple[str, str]], *, expected: int
    ) -> int:
        if any(kind == ResumedCall.kind for kind, _ in events):
            raise StoreError("the disk is full")
        return await self.inner.append(session, events, expected=expected)

    async def read(self, session: str, *, after: int = 0) -> list[object]:
        return await self.inner.read(session, after=after)  # type: ignore[return-value]

    async def sessions(self) -> list[str]:
        return await self.inner.sessions()

    async def readable(self, who: Readers, *, after: Cursor | None, limit: int) -> list[Cursor]:
        return await self.inner.readable(who, after=after, limit=limit)

    def session_lock(self) -> SharedSessionLock | None:
        return None

    async def close(self) -> None:
        await self.inner.close()


async def _resume(owned: OwnedJournalStore, store: object) -> tuple[Decided, list[Record]]:
    """Resume an approved call on ``store`` (``owned`` or a wrapper of it); its runtime's
    aclose closes the Store."""
    clock = ManualClock(START)
    script: list[dict[str, Any] | str] = [{"tool_calls": [refund_call("A1", 250)]}, "Refunded."]
    runtime = runtime_for(
        service(),
        store=store,  # type: ignore[arg-type]
        providers={"default": ScriptedProvider(script, name="default", clock=clock)},
        clock=clock,
        approvals=owned.store.approvals,
        approval_tick_seconds=3600,
    )
    async with runtime:
        result = await runtime.run(runtime.plan("refunds", "s", "Refund A1 by 250."))
        (request,) = result.awaiting
        decided = await runtime.approvals.decide(
            request.id, "approved", request.digest, decided_by="ann"
        )
        records = [e.record for e in await runtime.context.journal.read("s")]
    return decided, records


async def test_each_resumed_call_is_journaled_before_the_turn_goes_on(tmp_path: Path) -> None:
    owned = await journal_store(tmp_path / "journal.sqlite3")
    decided, records = await _resume(owned, owned)
    assert decided.status == "completed"
    kinds = [type(r).__name__ for r in records]
    # the resumed call's record comes before the committed turn's messages
    assert kinds.index("ResumedCall") < kinds.index("AssistantMessage")


async def test_a_resumed_call_the_store_refuses_is_logged_and_the_turn_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    owned = await journal_store(tmp_path / "journal.sqlite3")
    decided, records = await _resume(owned, RefusingResumedCalls(owned))
    assert decided.status == "completed"
    assert not any(isinstance(r, ResumedCall) for r in records)
    assert "could not journal a resumed call" in caplog.text
    final = [r for r in records if isinstance(r, AssistantMessage)][-1]
    assert final.turn_usage is not None
