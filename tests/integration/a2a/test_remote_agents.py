"""ankka delegates to an agent built with the official a2a-sdk (a real server process on
loopback): the message is sent once, the remote task is followed to its typed end, and a
follower that restarts (its process gone after the send) resumes without sending again."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider

from ankka.runtime.providers.a2a_remote import RemoteAgents
from ankka.runtime.providers.remote_agents import RemoteAgent
from tests.support.processes import Server, start

pytestmark = pytest.mark.integration


class MemoryLedger:
    """The caller's durable record, kept in a dict the test hands from one follower to the next
    (a stand-in for the journal a delegating task writes)."""

    def __init__(self) -> None:
        self.tasks: dict[str, tuple[str, str]] = {}
        self.written = asyncio.Event()

    async def find(self, key: str) -> tuple[str, str] | None:
        return self.tasks.get(key)

    async def remember(self, key: str, task_id: str, context_id: str) -> None:
        self.tasks[key] = (task_id, context_id)
        self.written.set()


def _sdk_server(*args: str) -> Server:
    return start([sys.executable, "-m", "tests.support.a2a_sdk_server", "--port", "0", *args])


@pytest.fixture
def sdk_agent() -> Iterator[Server]:
    server = _sdk_server("--delay", "1.5", "--fail", "impossible")
    yield server
    server.stop()


def _traceparents(server: Server) -> list[str]:
    heard: list[str] = httpx.get(f"{server.url}/_count").json()["traceparents"]
    return heard


def _sent(server: Server) -> int:
    return int(httpx.get(f"{server.url}/_count").json()["messages"])


async def test_a_delegated_message_ends_completed_with_the_remote_result(
    sdk_agent: Server,
) -> None:
    agent = RemoteAgent("echo", f"{sdk_agent.url}/.well-known/agent-card.json")
    async with RemoteAgents(poll_seconds=0.2) as remote:
        outcome = await remote.delegate(agent, key="t1/call-1", text="hello", ledger=MemoryLedger())
    assert (outcome.kind, outcome.result) == ("completed", "echo: hello")
    assert outcome.task_id


async def test_a_remote_failure_is_a_typed_failure_with_its_reason(sdk_agent: Server) -> None:
    agent = RemoteAgent("echo", f"{sdk_agent.url}/.well-known/agent-card.json")
    async with RemoteAgents(poll_seconds=0.2) as remote:
        outcome = await remote.delegate(agent, key="t1/x", text="impossible", ledger=MemoryLedger())
    assert outcome.kind == "failed"
    assert "cannot do" in outcome.reason


async def test_a_follower_that_restarts_after_the_send_resumes_and_sends_nothing(
    sdk_agent: Server,
) -> None:
    agent = RemoteAgent("echo", f"{sdk_agent.url}/.well-known/agent-card.json")
    ledger = MemoryLedger()
    async with RemoteAgents(poll_seconds=0.2) as first:
        following = asyncio.create_task(
            first.delegate(agent, key="t2/call-7", text="once", ledger=ledger)
        )
        async with asyncio.timeout(30):
            await ledger.written.wait()
        following.cancel()  # the follower's process is gone, its ledger kept
        with pytest.raises(asyncio.CancelledError):
            await following
    assert await asyncio.to_thread(_sent, sdk_agent) == 1
    async with RemoteAgents(poll_seconds=0.2) as second:
        outcome = await second.delegate(agent, key="t2/call-7", text="once", ledger=ledger)
    assert (outcome.kind, outcome.result) == ("completed", "echo: once")
    assert outcome.task_id == ledger.tasks["t2/call-7"][0]
    assert await asyncio.to_thread(_sent, sdk_agent) == 1


async def test_no_answer_within_the_deadline_is_unreachable() -> None:
    server = _sdk_server("--delay", "30")
    try:
        agent = RemoteAgent("slow", f"{server.url}/.well-known/agent-card.json")
        async with RemoteAgents(poll_seconds=0.2) as remote:
            outcome = await remote.delegate(
                agent, key="t3", text="slow", ledger=MemoryLedger(), deadline=2.0
            )
        assert outcome.kind == "unreachable"
        assert outcome.task_id  # it was sent: the caller knows which task to ask about
    finally:
        server.stop()


async def test_every_request_to_the_remote_carries_the_current_trace_context(
    sdk_agent: Server,
) -> None:
    provider = TracerProvider()  # not the global one: only this test's span is current
    tracer = provider.get_tracer("test")
    agent = RemoteAgent("echo", f"{sdk_agent.url}/.well-known/agent-card.json")
    async with RemoteAgents(poll_seconds=0.2) as remote:
        with tracer.start_as_current_span("delegating") as span:
            outcome = await remote.delegate(agent, key="t3/c", text="hi", ledger=MemoryLedger())
        context = span.get_span_context()
        heard = await asyncio.to_thread(_traceparents, sdk_agent)
        assert outcome.kind == "completed"
        assert heard, "no request carried a traceparent"
        # version, trace id, the span's id; the flags say sampled (and a random trace id)
        assert {h.rsplit("-", 1)[0] for h in heard} == {
            f"00-{context.trace_id:032x}-{context.span_id:016x}"
        }
        # Outside any span, nothing is sent.
        await remote.delegate(agent, key="t4/c", text="hi", ledger=MemoryLedger())
    assert await asyncio.to_thread(_traceparents, sdk_agent) == heard
    provider.shutdown()
