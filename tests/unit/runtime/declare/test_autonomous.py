"""Declaring task types and autonomous agents: pure, checked where declared."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.declare.tools import tool
from ankka.runtime.tasks import Accepts, AutonomousAgent, TaskType
from examples import tasks as example


class Result(BaseModel):
    answer: str


@tool
def complete_task(x: str) -> str:
    """A tool that takes a built-in's name."""
    return x


def test_the_example_declares_researcher_accepting_summary_with_budget_five() -> None:
    agent = example.service.autonomous_agents["researcher"]
    accepted = agent.accepted("summary")
    assert accepted is not None
    assert accepted.budget == 5
    assert agent.model == "default"
    assert [t.name for t in agent.tools] == ["lookup"]
    assert accepted.task_type.result.model_fields.keys() == {"title", "points"}
    empty = example.Summary(title="t", points=[])
    assert [r.check(empty) for r in accepted.task_type.rules] == [
        "a summary needs at least one point"
    ]
    assert [
        r.check(example.Summary(title="t", points=["p"])) for r in accepted.task_type.rules
    ] == [None]


def test_a_task_type_name_must_be_a_wire_name() -> None:
    with pytest.raises(ConfigurationError, match="not a wire name"):
        TaskType("Summary Type", result=Result)


def test_a_task_type_result_must_be_a_pydantic_model() -> None:
    with pytest.raises(ConfigurationError, match="pydantic model class"):
        TaskType("x", result=dict)  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [0, -5, True, 2.5])
def test_a_task_types_output_token_limit_is_a_whole_number_of_at_least_one(limit: object) -> None:
    with pytest.raises(ConfigurationError, match="max_output_tokens must be a whole number"):
        TaskType("brief", result=Result, max_output_tokens=limit)  # type: ignore[arg-type]


def test_a_budget_outside_its_bounds_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="budget must be 1 to"):
        Accepts(TaskType("x", result=Result), budget=0)


def test_an_agent_may_not_shadow_the_built_in_tools() -> None:
    with pytest.raises(ConfigurationError, match="complete_task is a built-in tool"):
        AutonomousAgent(
            name="a",
            accepts=[Accepts(TaskType("x", result=Result), budget=2)],
            tools=[complete_task],
        )


def test_an_autonomous_agent_must_accept_a_task_type_once() -> None:
    kind = TaskType("x", result=Result)
    with pytest.raises(ConfigurationError, match="accepts no task type"):
        AutonomousAgent(name="a", accepts=[])
    with pytest.raises(ConfigurationError, match="accepts task type 'x' twice"):
        AutonomousAgent(name="a", accepts=[Accepts(kind, budget=1), Accepts(kind, 2)])


def test_request_and_autonomous_agents_share_one_namespace() -> None:
    service = Service("s")

    @service.agent("a")
    def handler(request: TurnRequest) -> Turn:
        return Turn(message=request.message)

    with pytest.raises(ConfigurationError, match="declared twice"):
        service.autonomous(
            AutonomousAgent(name="a", accepts=[Accepts(TaskType("x", result=Result), budget=1)])
        )
