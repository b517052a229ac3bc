"""Tool approvals on a real SQLite file with the scripted provider: suspend, decide, resume,
expire, and the refusals (wrong digest, second decision, a new turn, a handler gone)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest

from ankka._kernel.clock import ManualClock
from ankka._kernel.errors import AnkkaError
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.declare.tools import tool
from ankka.runtime.drivers.approval_errors import ApprovalConflict, HandlerGone
from ankka.runtime.drivers.approvals import Timers
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.accounting import UnwrittenCalls
from ankka.runtime.records.approvals import (
    ApprovalDecided,
    ApprovalRequest,
    ApprovedCallStarted,
    ElicitationAnswered,
    ResumedCall,
    TurnEnded,
    TurnSuspended,
    canonical_arguments,
    digest,
)
from ankka.runtime.records.messages import (
    AssistantMessage,
    ModelCall,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from ankka.runtime.records.registry import Record, decode, encode
from ankka.runtime.serve.http import create_app
from tests.support.eventually import eventually_async
from tests.support.runtimes import runtime_for
from tests.support.stores import journal_store

START = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
RAN: list[tuple[str, float]] = []


@tool(requires_approval=lambda args: args.amount > 100, approval_timeout=60)
def refund(order: str, amount: float) -> str:
    """Refund an order."""
    RAN.append((order, amount))
    return f"refunded {amount} on {order}"


def refund_call(order: str, amount: float) -> dict[str, Any]:
    return {"name": "refund", "arguments": {"order": order, "amount": amount}}


def service() -> Service:
    s = Service("refunds")

    @s.agent("refunds")
    def refunds(request: TurnRequest) -> Turn:
        return Turn(message=request.message, tools=[refund])

    return s


class Make(Protocol):
    async def __call__(
        self, service: Service, script: Sequence[dict[str, Any] | str]
    ) -> tuple[Runtime, ScriptedProvider]: ...


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Make]:
    made: list[Runtime] = []
    RAN.clear()

    async def build(
        service: Service, script: Sequence[dict[str, Any] | str]
    ) -> tuple[Runtime, ScriptedProvider]:
        for r in made:  # one runtime on the file at a time, as one process
            await r.aclose()
        made.clear()
        path = tmp_path / "journal.sqlite3"
        store = await journal_store(path)  # the runtime's aclose closes the Store
        index = store.store.approvals
        clock = ManualClock(START)
        provider = ScriptedProvider(script, name="default", clock=clock)
        runtime = runtime_for(
            service,
            store=store,
            providers={"default": provider},
            clock=clock,
            approvals=index,
            approval_tick_seconds=3600,  # the tests expire by hand
        )
        await runtime.__aenter__()
        made.append(runtime)
        return runtime, provider

    yield build
    for r in made:
        await r.aclose()


async def suspend(runtime: Runtime, message: str = "refund") -> tuple[ApprovalRequest, ...]:
    result = await runtime.run(runtime.plan("refunds", "s", message))
    assert result.outcome is None
    return result.awaiting


async def test_a_small_refund_runs_without_a_decision(make: Make) -> None:
    runtime, _ = await make(service(), [{"tool_calls": [refund_call("A1", 20)]}, "Done."])
    result = await runtime.run(runtime.plan("refunds", "s", "refund A1"))
    assert result.reply == "Done."
    assert RAN == [("A1", 20.0)]


async def test_approve_runs_the_call_once_with_the_recorded_arguments(make: Make) -> None:
    runtime, provider = await make(
        service(), [{"tool_calls": [refund_call("A1", 250)]}, "Refunded."]
    )
    (request,) = await suspend(runtime)
    assert RAN == []
    assert request.tool == "refund"
    assert request.expires_at is not None
    decided = await runtime.approvals.decide(
        request.id, "approved", request.digest, decided_by="spiffe://people/ann"
    )
    assert decided.status == "completed"
    assert decided.outcome is not None and decided.outcome.text == "Refunded."
    assert RAN == [("A1", 250.0)]
    kinds = [type(e.record).__name__ for e in await runtime.context.journal.read("s")]
    assert kinds == [
        "SessionOpened",  # who opened the session: the first record of every session
        "TurnSuspended",
        "ApprovalDecided",
        "ApprovedCallStarted",
        "ResumedCall",  # the resumed call, journaled as it returned (accounting if cut off)
        "UserMessage",
        "AssistantMessage",
        "ToolResult",
        "AssistantMessage",
    ]
    sent = provider.requests[1].messages[-1]
    assert isinstance(sent, ToolResult) and sent.content == "refunded 250.0 on A1"
    entries = await runtime.context.journal.read("s")
    decision = entries[2].record
    assert isinstance(decision, ApprovalDecided) and decision.decided_by == "spiffe://people/ann"


async def test_a_resumed_turn_that_fails_is_accounted_as_unwritten_calls(make: Make) -> None:
    spent = {"input_tokens": 30, "output_tokens": 4}
    script: list[dict[str, Any] | str] = [
        {"tool_calls": [refund_call("A1", 250)]},
        {"tool_calls": [refund_call("A2", 20)], "usage": spent},  # spent after the decision
        {"status": 503},  # then the model fails: the resumed turn writes no message
    ]
    runtime, _ = await make(service(), script)
    (request,) = await suspend(runtime)
    with pytest.raises(AnkkaError):
        await runtime.approvals.decide(request.id, "approved", request.digest, decided_by="ann")

    records = [e.record for e in await runtime.context.journal.read("s")]
    [unwritten] = [r for r in records if isinstance(r, UnwrittenCalls)]
    [suspended] = [r for r in records if isinstance(r, TurnSuspended)]
    # The turn's every call, from before its suspension (in no other count) and after it.
    assert (unwritten.agent, unwritten.turn, len(unwritten.calls)) == ("refunds", suspended.turn, 2)
    assert unwritten.calls[1].usage == Usage(30, 4)
    assert unwritten.reason == "model_unavailable"  # the kind of the failure, as for any turn
    assert isinstance(records[-1], TurnEnded) and records[-1].cause == "failed"
    summary = await runtime.summary("s")
    assert summary.tally.unwritten == unwritten.usage and summary.usage == Usage()
    assert [c for c, _, why, _ in await runtime.calls("s") if why is not None] == list(
        unwritten.calls
    )


async def test_refuse_tells_the_model_a_person_refused_and_why(make: Make) -> None:
    runtime, provider = await make(service(), [{"tool_calls": [refund_call("A1", 250)]}, "OK."])
    (request,) = await suspend(runtime)
    decided = await runtime.approvals.decide(
        request.id, "refused", request.digest, reason="not our order", decided_by="ann"
    )
    assert decided.status == "completed"
    assert RAN == []
    sent = provider.requests[1].messages[-1]
    assert isinstance(sent, ToolResult) and sent.is_error
    assert "a person refused" in sent.content and "not our order" in sent.content


async def test_expiry_decides_as_the_platform_worded_as_no_one_deciding(make: Make) -> None:
    runtime, provider = await make(service(), [{"tool_calls": [refund_call("A1", 250)]}, "OK."])
    (request,) = await suspend(runtime)
    assert await runtime.approvals.expire_due() == 0
    clock = runtime.clock
    assert isinstance(clock, ManualClock)
    clock.advance(61)
    assert await runtime.approvals.expire_due() == 1
    assert RAN == []
    sent = provider.requests[1].messages[-1]
    assert isinstance(sent, ToolResult) and sent.is_error
    assert "no one decided in time" in sent.content and "refused" not in sent.content
    decisions = [e.record for e in await runtime.context.journal.read("s")]
    decided = [r for r in decisions if isinstance(r, ApprovalDecided)]
    assert [(d.decision, d.decided_by) for d in decided] == [("expired", "platform")]
    with pytest.raises(ApprovalConflict, match="already decided: expired by platform"):
        await runtime.approvals.decide(request.id, "approved", request.digest, decided_by="ann")


async def test_a_session_in_a_turn_keeps_no_other_expiry_waiting(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expiries run side by side, each waiting a bounded time for its session's lock: one
    session held by a turn (in flight, or stuck) is expired at a later tick, and the others
    now (before, the timers waited on it, and every expiry after it with them)."""
    monkeypatch.setattr("ankka.runtime.drivers.approvals.LOCK_WAIT", 0.2)
    script = [{"tool_calls": [refund_call("A1", 250)]}, {"tool_calls": [refund_call("A2", 300)]}]
    runtime, _ = await make(service(), [*script, "OK.", "OK."])
    for session in ("held", "free"):
        result = await runtime.run(runtime.plan("refunds", session, "refund"))
        assert result.awaiting
    assert isinstance(runtime.clock, ManualClock)
    runtime.clock.advance(61)
    release, holding = asyncio.Event(), asyncio.Event()

    async def stuck_turn() -> None:
        async with runtime.context.queue.turn("held"):
            holding.set()
            await release.wait()

    holder = asyncio.create_task(stuck_turn())
    await holding.wait()
    async with asyncio.timeout(60):  # a hang fails here instead of stopping the suite
        assert await runtime.approvals.expire_due() == 1
    decided = {
        session: [
            e.record.decision
            for e in await runtime.context.journal.read(session)
            if isinstance(e.record, ApprovalDecided)
        ]
        for session in ("held", "free")
    }
    assert decided == {"held": [], "free": ["expired"]}
    release.set()
    await holder
    async with asyncio.timeout(60):
        assert await runtime.approvals.expire_due() == 1  # the next tick expires it
    held = [e.record for e in await runtime.context.journal.read("held")]
    assert [r.decision for r in held if isinstance(r, ApprovalDecided)] == ["expired"]


async def test_approval_expiring_is_notified_before_the_limit(make: Make) -> None:
    runtime, _ = await make(service(), [{"tool_calls": [refund_call("A1", 250)]}, "OK."])
    seen: list[tuple[str, dict[str, Any]]] = []
    runtime.approvals.notify = lambda event, data: seen.append((event, data))
    runtime.approvals.timers = Timers(notice_seconds=30)
    (request,) = await suspend(runtime)
    assert [e for e, _ in seen] == ["approval_requested"]
    assert isinstance(runtime.clock, ManualClock)
    runtime.clock.advance(35)
    await runtime.approvals.expire_due()
    await runtime.approvals.expire_due()  # noticed once
    assert [e for e, _ in seen] == ["approval_requested", "approval_expiring"]
    assert seen[1][1]["id"] == request.id


async def test_two_pending_calls_decided_in_either_order(make: Make) -> None:
    for order in ((0, 1), (1, 0)):
        calls = {"tool_calls": [refund_call("A1", 150), refund_call("B2", 300)]}
        runtime, provider = await make(service(), [calls, "Both handled."])
        requests = await suspend(runtime)
        assert [r.tool for r in requests] == ["refund", "refund"]
        first, second = (requests[i] for i in order)
        one = await runtime.approvals.decide(first.id, "approved", first.digest, decided_by="a")
        assert one.status == "recorded" and [p.id for p in one.pending] == [second.id]
        assert RAN == []
        two = await runtime.approvals.decide(
            second.id, "refused", second.digest, reason="too much", decided_by="b"
        )
        assert two.status == "completed"
        approved_order = "A1" if first is requests[0] else "B2"
        expected = [(approved_order, 150.0 if approved_order == "A1" else 300.0)]
        assert expected == RAN
        results = [m for m in provider.requests[1].messages if isinstance(m, ToolResult)][-2:]
        assert [r.call_id for r in results] == [r.call_id for r in requests]  # the model's order
        RAN.clear()


async def test_a_decision_with_a_wrong_digest_is_refused(make: Make) -> None:
    runtime, _ = await make(service(), [{"tool_calls": [refund_call("A1", 250)]}, "OK."])
    (request,) = await suspend(runtime)
    other = digest("refund", '{"order":"A1","amount":25000}', request.call_id, 1)
    with pytest.raises(ApprovalConflict, match="digest sent does not match"):
        await runtime.approvals.decide(request.id, "approved", other, decided_by="ann")
    assert RAN == []
    assert not [
        e for e in await runtime.context.journal.read("s") if isinstance(e.record, ApprovalDecided)
    ]


async def test_a_second_decision_is_refused_naming_the_first(make: Make) -> None:
    runtime, _ = await make(service(), [{"tool_calls": [refund_call("A1", 250)]}, "OK."])
    (request,) = await suspend(runtime)
    await runtime.approvals.decide(request.id, "approved", request.digest, decided_by="ann")
    with pytest.raises(ApprovalConflict, match="already decided: approved by ann"):
        await runtime.approvals.decide(request.id, "refused", request.digest, decided_by="bob")
    assert RAN == [("A1", 250.0)]


async def test_a_new_turn_while_suspended_is_refused_naming_the_pending_ids(make: Make) -> None:
    runtime, _ = await make(service(), [{"tool_calls": [refund_call("A1", 250)]}, "OK."])
    (request,) = await suspend(runtime)
    with pytest.raises(ApprovalConflict, match=request.id):
        await runtime.run(runtime.plan("refunds", "s", "another"))
    summary = await runtime.summary("s")
    assert [a.id for a in summary.awaiting] == [request.id]


async def test_a_renamed_handler_ends_the_turn_with_an_internal_error(make: Make) -> None:
    runtime, _ = await make(service(), [{"tool_calls": [refund_call("A1", 250)]}, "OK."])
    (request,) = await suspend(runtime)
    renamed = Service("refunds")

    @renamed.agent("refunds-v2")
    def other(request: TurnRequest) -> Turn:
        return Turn(message=request.message, tools=[refund])

    runtime, _ = await make(renamed, ["OK."])
    with pytest.raises(HandlerGone, match="cannot be planned again") as raised:
        await runtime.approvals.decide(request.id, "approved", request.digest, decided_by="a")
    assert raised.value.status == 500
    assert RAN == []
    last = (await runtime.context.journal.read("s"))[-1].record
    assert isinstance(last, TurnEnded) and last.cause == "internal_error"
    assert (await runtime.summary("s")).awaiting == ()


async def test_a_turn_cut_off_after_its_last_decision_is_ended_not_resumed(make: Make) -> None:
    runtime, _ = await make(service(), [{"tool_calls": [refund_call("A1", 250)]}, "OK."])
    (request,) = await suspend(runtime)
    # The decision recorded, then the process died before the start was (no resume ran).
    entries = await runtime.context.journal.read("s")
    decision = ApprovalDecided(request.id, request_turn(entries), "approved", "", "a", START)
    await runtime.context.journal.append("s", [decision], expected=entries[-1].seq)
    runtime, _ = await make(service(), ["never asked"])  # the restart
    last = (await runtime.context.journal.read("s"))[-1].record
    assert isinstance(last, TurnEnded) and last.cause == "cut_off"
    assert "not resumed" in last.reason
    assert RAN == []
    with pytest.raises(ApprovalConflict, match="already decided"):
        await runtime.approvals.decide(request.id, "approved", request.digest, decided_by="a")


SPENT = {"input_tokens": 11, "output_tokens": 5}  # the call that suspended the turn
SUSPENDING = {"tool_calls": [refund_call("A1", 250)], "usage": SPENT}


async def record_decision(runtime: Runtime, request: ApprovalRequest) -> None:
    """The decision recorded, then the process died before the resume (none ran)."""
    entries = await runtime.context.journal.read("s")
    decision = ApprovalDecided(request.id, request_turn(entries), "approved", "", "a", START)
    await runtime.context.journal.append("s", [decision], expected=entries[-1].seq)


async def assert_accounted_once(
    runtime: Runtime, reason: str, calls: int = 1, *, counted: bool = True
) -> UnwrittenCalls:
    """The ended turn's calls: one unwritten_calls record, right before its turn_ended, in
    the session's unwritten usage, in /calls and (``counted``: this process ended it) in the
    metrics; else in no metric of this process."""
    records = [e.record for e in await runtime.context.journal.read("s")]
    [unwritten] = [r for r in records if isinstance(r, UnwrittenCalls)]
    [suspended] = [r for r in records if isinstance(r, TurnSuspended)]
    ended = records[records.index(unwritten) + 1]
    assert isinstance(ended, TurnEnded) and ended.turn == suspended.turn
    assert (unwritten.turn, unwritten.agent, unwritten.reason) == (ended.turn, "refunds", reason)
    assert len(unwritten.calls) == calls and unwritten.calls[0].usage == Usage(11, 5)
    summary = await runtime.summary("s")
    assert summary.tally.unwritten == unwritten.usage
    assert summary.tally.unwritten_turns == 1
    assert [c for c, _, why, _ in await runtime.calls("s") if why == reason] == list(
        unwritten.calls
    )
    metrics = runtime.metrics.render().decode()
    total = unwritten.usage.input_tokens
    line = f'ankka_tokens_total{{agent="refunds",kind="input",provider="default"}} {total:.1f}'
    assert (line in metrics) is counted
    assert ("ankka_model_calls_total{" in metrics) is counted
    return unwritten


async def test_a_turn_cut_off_and_ended_at_a_restart_accounts_its_calls_once(make: Make) -> None:
    runtime, _ = await make(service(), [SUSPENDING])
    (request,) = await suspend(runtime)
    await record_decision(runtime, request)
    runtime, _ = await make(service(), [])  # the restart: recovery ends the turn
    await assert_accounted_once(runtime, "cut_off")
    runtime, _ = await make(service(), [])  # and again: nothing more is recorded or counted
    await assert_accounted_once(runtime, "cut_off", counted=False)
    with pytest.raises(ApprovalConflict, match="already decided"):
        await runtime.approvals.decide(request.id, "approved", request.digest, decided_by="a")
    await assert_accounted_once(runtime, "cut_off", counted=False)


async def test_a_turn_cut_off_found_by_the_next_turn_accounts_its_calls_once(make: Make) -> None:
    runtime, _ = await make(service(), [SUSPENDING, "Hello."])
    (request,) = await suspend(runtime)
    await record_decision(runtime, request)  # in this process: no recovery ran
    result = await runtime.run(runtime.plan("refunds", "s", "hi"))
    assert result.reply == "Hello."
    await assert_accounted_once(runtime, "cut_off")
    summary = await runtime.summary("s")
    assert (summary.turns, summary.tally.unwritten_turns) == (1, 1)


async def test_a_turn_whose_handler_is_gone_accounts_its_calls_once(make: Make) -> None:
    runtime, _ = await make(service(), [SUSPENDING])
    (request,) = await suspend(runtime)
    renamed = Service("refunds")

    @renamed.agent("refunds-v2")
    def other(request: TurnRequest) -> Turn:
        return Turn(message=request.message, tools=[refund])

    runtime, _ = await make(renamed, [])
    with pytest.raises(HandlerGone):
        await runtime.approvals.decide(request.id, "approved", request.digest, decided_by="a")
    await assert_accounted_once(runtime, "internal_error")
    with pytest.raises(ApprovalConflict):  # the ending is not tried again
        await runtime.approvals.decide(request.id, "approved", request.digest, decided_by="a")
    await assert_accounted_once(runtime, "internal_error")


async def test_an_expired_turn_whose_model_then_fails_accounts_every_call_once(
    make: Make,
) -> None:
    runtime, _ = await make(service(), [SUSPENDING, {"status": 503}])
    await suspend(runtime)
    assert isinstance(runtime.clock, ManualClock)
    runtime.clock.advance(61)
    assert await runtime.approvals.expire_due() == 1
    await assert_accounted_once(runtime, "model_unavailable")
    assert await runtime.approvals.expire_due() == 0
    runtime, _ = await make(service(), [])  # a restart finds nothing left to end
    assert await runtime.approvals.expire_due() == 0
    records = [e.record for e in await runtime.context.journal.read("s")]
    assert len([r for r in records if isinstance(r, UnwrittenCalls)]) == 1


async def test_a_cancelled_resume_is_ended_with_every_call_it_made(make: Make) -> None:
    small = {"tool_calls": [refund_call("B2", 20)], "usage": {"input_tokens": 3}}
    runtime, _ = await make(service(), [SUSPENDING, small, {"delay_ms": 5000, "text": "late"}])
    (request,) = await suspend(runtime)
    deciding = asyncio.ensure_future(
        runtime.approvals.decide(request.id, "approved", request.digest, decided_by="a")
    )
    clock = runtime.clock
    assert isinstance(clock, ManualClock)

    async def waiting_on_its_third_call() -> bool:
        return bool(clock.sleeping)  # its calls are journaled as they return: real writes

    await eventually_async(
        waiting_on_its_third_call,
        what="the resumed turn to wait on its third model call",
        timeout=10,
        interval=0.001,
    )
    deciding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await deciding
    assert RAN == [("A1", 250.0), ("B2", 20.0)]
    unwritten = await assert_accounted_once(runtime, "cancelled", calls=2)
    assert unwritten.calls[1].usage == Usage(3)
    runtime, _ = await make(service(), [])  # recovery finds the turn ended
    await assert_accounted_once(runtime, "cancelled", calls=2, counted=False)


async def test_a_turn_cut_off_after_resumed_calls_accounts_them_once(make: Make) -> None:
    runtime, _ = await make(service(), [SUSPENDING])
    (request,) = await suspend(runtime)
    await record_decision(runtime, request)
    # What a resumer killed mid-resume leaves: its call's start and one call it made after.
    entries = await runtime.context.journal.read("s")
    turn = request_turn(entries)
    after = ModelCall("default", "scripted", "refunds", 2.0, Usage(7, 2))
    left: list[Record] = [
        ApprovedCallStarted(request.id, turn, "c", request.digest),
        ResumedCall(turn, after),
    ]
    await runtime.context.journal.append("s", left, expected=entries[-1].seq)
    runtime, _ = await make(service(), [])  # the restart: recovery ends the turn
    unwritten = await assert_accounted_once(runtime, "cut_off", calls=2)
    assert unwritten.calls[1] == after
    runtime, _ = await make(service(), [])  # and again: nothing more is recorded or counted
    await assert_accounted_once(runtime, "cut_off", calls=2, counted=False)


async def test_a_resumed_turn_written_or_suspended_again_counts_its_calls_once(
    make: Make,
) -> None:
    again = {"tool_calls": [refund_call("A2", 300)], "usage": {"input_tokens": 7}}
    script: list[dict[str, Any] | str] = [
        SUSPENDING,
        again,
        {"text": "Both refunded.", "usage": {"input_tokens": 5}},
    ]
    runtime, _ = await make(service(), script)
    (first,) = await suspend(runtime)
    decided = await runtime.approvals.decide(first.id, "approved", first.digest, decided_by="a")
    assert decided.status == "awaiting_approval"
    (second,) = decided.pending
    folded = await runtime.context.sessions.load("s")
    current = folded.approvals.current
    assert current is not None  # the new suspension carries the resumed call on its answers
    assert [c.usage.input_tokens for c in current.all_calls] == [11, 7]
    decided = await runtime.approvals.decide(second.id, "approved", second.digest, decided_by="a")
    assert decided.status == "completed"
    records = [e.record for e in await runtime.context.journal.read("s")]
    assert [r.call.usage.input_tokens for r in records if isinstance(r, ResumedCall)] == [7, 5]
    summary = await runtime.summary("s")
    assert summary.tally.unwritten_turns == 0 and summary.usage.input_tokens == 23
    assert [c.usage.input_tokens for c, _, _, _ in await runtime.calls("s")] == [11, 7, 5]


async def test_a_resumed_turn_that_completes_is_in_the_metrics(make: Make) -> None:
    runtime, _ = await make(service(), [SUSPENDING, {"text": "Refunded.", "usage": SPENT}])
    (request,) = await suspend(runtime)
    assert "ankka_model_calls_total{" not in runtime.metrics.render().decode()
    await runtime.approvals.decide(request.id, "approved", request.digest, decided_by="a")
    metrics = runtime.metrics.render().decode()
    assert 'ankka_model_calls_total{agent="refunds",model="scripted",provider="default"} 2.0' in (
        metrics
    )
    assert 'ankka_turns_total{agent="refunds",outcome="ok"} 1.0' in metrics


def request_turn(entries: Sequence[Any]) -> str:
    first = entries[1].record  # after the session's session_opened
    assert isinstance(first, TurnSuspended)
    return first.turn


async def test_the_http_shape_202_then_decide(make: Make) -> None:
    runtime, _ = await make(service(), [{"tool_calls": [refund_call("A1", 250)]}, "Refunded."])
    app = create_app(runtime, approver_header="x-approver")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://runtime") as client:
        answer = await client.post("/v1/agents/refunds/sessions/s", json={"message": "refund"})
        assert answer.status_code == 202
        body = answer.json()
        assert body["status"] == "awaiting_approval"
        (shown,) = body["approvals"]
        assert set(shown) == {"id", "tool", "arguments", "digest", "expires_at"}
        assert shown["arguments"] == {"order": "A1", "amount": 250}
        again = await client.post("/v1/agents/refunds/sessions/s", json={"message": "more"})
        assert again.status_code == 409 and shown["id"] in again.json()["error"]["message"]
        listed = await client.get("/v1/approvals", params={"state": "pending", "session": "s"})
        assert [a["id"] for a in listed.json()["approvals"]] == [shown["id"]]
        session = await client.get("/v1/sessions/s")
        assert [a["id"] for a in session.json()["awaiting_approval"]] == [shown["id"]]
        bad = await client.post(f"/v1/approvals/{shown['id']}", json={"decision": "yes"})
        assert bad.status_code == 422
        decided = await client.post(
            f"/v1/approvals/{shown['id']}",
            json={"decision": "approve", "digest": shown["digest"]},
            headers={"x-approver": "ann@example.com"},
        )
        assert decided.status_code == 200, decided.text
        assert decided.json()["status"] == "completed"
        assert decided.json()["decided_by"] == "ann@example.com"
        assert decided.json()["turn"]["reply"] == "Refunded."
        twice = await client.post(
            f"/v1/approvals/{shown['id']}",
            json={"decision": "refuse", "digest": shown["digest"]},
        )
        assert twice.status_code == 409
        assert "approved by ann@example.com" in twice.json()["error"]["message"]
        listed = await client.get("/v1/approvals", params={"state": "pending"})
        assert listed.json()["approvals"] == []
    assert RAN == [("A1", 250.0)]


def test_the_records_encodings_are_pinned() -> None:
    request = ApprovalRequest("apr_1", "c1", "refund", '{"amount":250}', "d" * 64, START)
    suspended = TurnSuspended(
        "t1",
        "refunds",
        "refund",
        (
            UserMessage("refund", "refunds", "t1"),
            AssistantMessage("", (ToolCall("c1", "refund", '{"amount":250}'),), "refunds", "t1"),
        ),
        (request,),
    )
    records: list[Record] = [
        suspended,
        ApprovalDecided("apr_1", "t1", "refused", "no", "ann", START),
        ApprovedCallStarted("apr_1", "t1", "c1", "d" * 64),
        TurnEnded("t1", "cut_off", "why"),
        ResumedCall("t1", ModelCall("default", "m", "refunds", 1.5, Usage(3, 1))),
    ]
    for record in records:
        kind, body = encode(record)
        assert decode(kind, body) == record
    kind, body = encode(records[1])
    assert kind == "approval_decided"
    assert json.loads(body) == {
        "approval": "apr_1",
        "turn": "t1",
        "decision": "refused",
        "reason": "no",
        "decided_by": "ann",
        "at": "2026-12-01T08:00:00+00:00",
    }
    question = ApprovalRequest(
        "eli_1", "c1", "mcp__shop__buy", '{"message":"How many?"}', "d" * 64, None
    )
    decided = ApprovalDecided("eli_1", "t1", "approved", "", "ann", START)
    answered = ElicitationAnswered("shop", question, decided, "accept", {"quantity": 2})
    kind, body = encode(answered)
    assert kind == "elicitation_answered" and decode(kind, body) == answered
    assert json.loads(body) == {
        "server": "shop",
        "request": question.as_dict(),
        "decided": decided.as_dict(),
        "action": "accept",
        "content": {"quantity": 2},
    }


def test_the_digest_binds_name_canonical_arguments_call_and_position() -> None:
    base = digest("refund", '{"order": "A1", "amount": 250}', "c1", 4)
    assert base == digest("refund", '{"amount":250,"order":"A1"}', "c1", 4)
    assert canonical_arguments('{"b": 1, "a": 2}') == '{"a":2,"b":1}'
    for other in (
        digest("refund2", '{"order":"A1","amount":250}', "c1", 4),
        digest("refund", '{"order":"A1","amount":251}', "c1", 4),
        digest("refund", '{"order":"A1","amount":250}', "c2", 4),
        digest("refund", '{"order":"A1","amount":250}', "c1", 5),
    ):
        assert other != base


async def test_a_stream_agent_ends_its_stream_with_the_awaiting_approval_event(
    make: Make,
) -> None:
    streaming = Service("refunds")

    @streaming.agent("refunds")
    def refunds(request: TurnRequest) -> Turn:
        return Turn(message=request.message, tools=[refund], answer="stream")

    runtime, _ = await make(streaming, [{"tool_calls": [refund_call("A1", 250)]}, "OK."])
    transport = httpx.ASGITransport(app=create_app(runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://runtime") as client:
        answer = await client.post("/v1/agents/refunds/sessions/s", json={"message": "refund"})
    assert answer.status_code == 200
    events = [line for line in answer.text.splitlines() if line.startswith("event: ")]
    assert events[-1] == "event: awaiting_approval"
    data = json.loads(answer.text.strip().splitlines()[-1].removeprefix("data: "))
    assert data["status"] == "awaiting_approval" and data["approvals"][0]["tool"] == "refund"
    assert RAN == []
