"""The loop's invariants on every wire (Chat Completions, Responses, Anthropic Messages), for
every kind of work: a request session (tool rounds, two agents, a typed answer, a turn
resumed after approval) and a task (tool rounds, a rejected result, the budget's end near).
The requests the scripted provider received are encoded as each wire sends them."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ankka._kernel.clock import ManualClock
from ankka.runtime.declare.agents import Memory, Service, Turn, TurnRequest
from ankka.runtime.declare.autonomous import Accepts, AutonomousAgent
from ankka.runtime.declare.tools import tool
from ankka.runtime.providers.base import ModelRequest
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.messages import AssistantMessage, UserMessage
from examples.tasks import summary
from tests.support.invariants import WIRES, check_extends, check_roles, encode
from tests.support.runtimes import runtime_for
from tests.support.stores import journal_store
from tests.unit.runtime.conftest import MakeHost, finished, put


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool(requires_approval=True)
def publish(key: str) -> str:
    """Publish a key."""
    return f"published {key}"


class Answer(BaseModel):
    value: str


_keys = itertools.count()


def calls(*names: str) -> dict[str, Any]:
    """An answer calling ``names``, each with a key of its own (the same call asked for three
    times ends a task: docs/delegation.md)."""
    return {"tool_calls": [{"name": n, "arguments": {"key": f"k{next(_keys)}"}} for n in names]}


def request_service() -> Service:
    service = Service("shape")

    @service.agent("main")
    def main(request: TurnRequest) -> Turn:
        return Turn(message=request.message, instructions="Be brief.", tools=[lookup, publish])

    @service.agent("critic")
    def critic(request: TurnRequest) -> Turn:
        return Turn(message=request.message, memory=Memory.all(), answer=Answer)

    return service


def check(requests: list[ModelRequest]) -> None:
    """Every request well-formed on every wire; each after the first of its run an
    extension of the one before."""
    for wire in WIRES:
        bodies = [encode(wire, r) for r in requests]
        for body in bodies:
            check_roles(wire, json.loads(body))
        for before, after in itertools.pairwise(bodies):
            check_extends(wire, before, after)


async def test_a_request_turn_never_rewrites_what_it_sent_on_any_wire(tmp_path: Path) -> None:
    script: list[dict[str, Any] | str] = [calls("lookup"), calls("lookup", "lookup"), "one"]
    provider = ScriptedProvider(script, name="default")
    store = await journal_store(tmp_path / "s.sqlite3")
    async with runtime_for(request_service(), store=store, providers={"default": provider}) as rt:
        await rt.run(rt.plan("main", "s", "first"))
    check(provider.requests)


async def test_every_request_of_a_session_is_well_formed_on_every_wire(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    clock = ManualClock(datetime(2026, 12, 1, tzinfo=UTC))
    script: list[dict[str, Any] | str] = [
        calls("lookup"),
        "one",
        calls("publish", "lookup"),
        "two",
        '{"value": "fine"}',
    ]
    provider = ScriptedProvider(script, name="default", clock=clock)
    store = await journal_store(path)  # the runtime's aclose closes the Store
    rt = runtime_for(
        request_service(),
        store=store,
        providers={"default": provider},
        approvals=store.store.approvals,
        clock=clock,
        approval_tick_seconds=3600,
    )
    async with rt:
        await rt.run(rt.plan("main", "s", "first"))
        suspended = await rt.run(rt.plan("main", "s", "second"))
        (approval,) = suspended.awaiting
        await rt.approvals.decide(approval.id, "approved", approval.digest, decided_by="ann")
        await rt.run(rt.plan("critic", "s", "review"))
    for wire in WIRES:
        for sent in provider.requests:
            check_roles(wire, json.loads(encode(wire, sent)))
    # Within a turn, resumed or not, each call extends the one before.
    check(provider.requests[2:4])


@pytest.mark.parametrize("budget", [5, 2])
async def test_a_tasks_requests_each_extend_the_one_before_on_every_wire(
    make_host: MakeHost, budget: int
) -> None:
    service = Service("tasks")
    service.autonomous(
        AutonomousAgent(
            name="researcher",
            tools=[lookup],
            accepts=[Accepts(summary, budget=budget)],
        )
    )
    good = {"title": "t", "points": ["p"]}
    rejected = {
        "tool_calls": [{"name": "complete_task", "arguments": {"title": "t", "points": []}}]
    }
    done = {"tool_calls": [{"name": "complete_task", "arguments": good}]}
    script = [calls("lookup", "lookup"), rejected, calls("lookup"), calls("lookup"), done]
    provider = ScriptedProvider(script[-budget:], name="default")
    host = await make_host(service, provider)
    await put(host, "t1")
    assert (await finished(host, "t1")).state.value == "completed"
    assert len(provider.requests) == budget
    check(provider.requests)


def test_the_checks_catch_a_rewritten_message_and_two_user_messages_in_a_row() -> None:
    first = ModelRequest("i", (UserMessage("task"), AssistantMessage("a"), UserMessage("more")))
    rewritten = ModelRequest(
        "i", (UserMessage("task, now near the end"), AssistantMessage("a"), UserMessage("more"))
    )
    twice = ModelRequest("i", (UserMessage("task"), UserMessage("still open")))
    for wire in WIRES:
        with pytest.raises(AssertionError):
            check_extends(wire, encode(wire, first), encode(wire, rewritten))
        if wire != "anthropic":  # Anthropic's wire merges neighbours of one role
            with pytest.raises(AssertionError):
                check_roles(wire, json.loads(encode(wire, twice)))
