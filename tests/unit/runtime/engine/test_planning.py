"""A turn is a value: planning builds a frozen PlannedTurn, and run() takes nothing else."""

from __future__ import annotations

import dataclasses

import pytest

from ankka._kernel.errors import ConfigurationError, NotFound
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.engine.planning import PlannedTurn
from tests.unit.runtime.conftest import MakeRuntime


def service() -> Service:
    declared = Service("test")

    @declared.agent("echo")
    def echo(request: TurnRequest) -> Turn:
        return Turn(message=request.message, instructions=f"for {request.session}")

    @declared.agent("streamer")
    def streamer(request: TurnRequest) -> Turn:
        return Turn(message=request.message, answer="stream")

    @declared.agent("elsewhere")
    def elsewhere(request: TurnRequest) -> Turn:
        return Turn(message=request.message, model="big")

    @declared.agent("broken")
    def broken(request: TurnRequest) -> Turn:
        return "not a turn"  # type: ignore[return-value]

    return declared


async def test_a_plan_is_a_frozen_value_holding_the_request_effect_and_provider(
    make_runtime: MakeRuntime,
) -> None:
    runtime, provider = await make_runtime(service(), [])
    planned = runtime.plan("echo", "s1", "hi")
    assert isinstance(planned, PlannedTurn)
    assert (planned.agent, planned.session, planned.message) == ("echo", "s1", "hi")
    assert planned.request == TurnRequest("echo", "s1", "hi")
    assert planned.effect.instructions == "for s1"
    assert planned.provider is provider
    assert not planned.streams and runtime.plan("streamer", "s1", "hi").streams
    with pytest.raises(dataclasses.FrozenInstanceError):
        planned.effect = Turn(message="other")  # type: ignore[misc]


async def test_a_plan_rebuilt_from_its_recorded_request_is_the_same_turn(
    make_runtime: MakeRuntime,
) -> None:
    runtime, _ = await make_runtime(service(), [])
    recorded = runtime.plan("echo", "s1", "hi").request
    again = runtime.plan(recorded.agent, recorded.session, recorded.message)
    assert again == runtime.plan("echo", "s1", "hi")


async def test_planning_names_what_is_missing_before_anything_runs(
    make_runtime: MakeRuntime,
) -> None:
    runtime, provider = await make_runtime(service(), [])
    with pytest.raises(NotFound, match=r"no agent 'nobody'.*agents: broken, echo, elsewhere"):
        runtime.plan("nobody", "s", "hi")
    with pytest.raises(ConfigurationError, match="returned str, not a Turn"):
        runtime.plan("broken", "s", "hi")
    with pytest.raises(ConfigurationError, match=r"model 'big'.*ANKKA_MODEL_BIG_PRESET"):
        runtime.plan("elsewhere", "s", "hi")
    assert provider.requests == [] and await runtime.messages("s") == []
