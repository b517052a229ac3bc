"""Declaring teams and moderated conversations: what is refused, and how, where it is declared."""

from __future__ import annotations

import pytest

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.agents import Service
from ankka.runtime.tasks import Accepts, AutonomousAgent
from ankka.runtime.teams import Conversation, Moderated, RoundRobin, Team
from ankka.runtime.tools import tool
from examples.tasks import summary


def agent(name: str) -> AutonomousAgent:
    return AutonomousAgent(name=name, accepts=[Accepts(summary, budget=2)])


def service_of(*names: str) -> Service:
    service = Service("s")
    for name in names:
        service.autonomous(agent(name))
    return service


def test_a_team_names_only_agents_its_service_declares() -> None:
    service = service_of("lead", "a")
    with pytest.raises(ConfigurationError, match="'b', not an autonomous agent of 's'"):
        service.team(Team(name="t", lead="lead", members=["a", "b"]))


def test_a_team_is_declared_once_with_members_each_once() -> None:
    service = service_of("lead", "a")
    service.team(Team(name="t", lead="lead", members=["a"]))
    with pytest.raises(ConfigurationError, match="declared twice"):
        service.team(Team(name="t", lead="lead", members=["a"]))
    with pytest.raises(ConfigurationError, match="each once"):
        Team(name="u", lead="lead", members=["a", "a"])
    with pytest.raises(ConfigurationError, match="no members"):
        Team(name="u", lead="lead", members=[])


def test_a_leads_own_tool_may_not_take_a_backlog_tools_name() -> None:
    @tool
    def backlog_add_item(note: str) -> str:
        """Its own."""
        return note

    service = Service("s")
    service.autonomous(
        AutonomousAgent(name="lead", tools=[backlog_add_item], accepts=[Accepts(summary, budget=2)])
    )
    service.autonomous(agent("a"))
    with pytest.raises(ConfigurationError, match="'backlog_add_item', a name of the backlog"):
        service.team(Team(name="t", lead="lead", members=["a"]))


def test_no_agent_of_a_team_may_take_the_message_tools_name_or_be_named_everyone() -> None:
    @tool
    def team_send_message(note: str) -> str:
        """Its own."""
        return note

    service = service_of("lead")
    service.autonomous(
        AutonomousAgent(name="a", tools=[team_send_message], accepts=[Accepts(summary, budget=2)])
    )
    with pytest.raises(ConfigurationError, match="agent 'a' has a tool named 'team_send_message'"):
        service.team(Team(name="t", lead="lead", members=["a"]))
    with pytest.raises(ConfigurationError, match="an agent named 'everyone' cannot be on a team"):
        Team(name="t", lead="lead", members=["everyone"])


def test_a_teams_budget_and_instances_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="iterations must be at least 1"):
        Team(name="t", lead="l", members=["a"], iterations=0)
    with pytest.raises(ConfigurationError, match="instances must be 1 to 16"):
        Team(name="t", lead="l", members=["a"], instances=0)
    with pytest.raises(Exception, match="not a valid id"):
        Team(name="no spaces", lead="l", members=["a"])


def test_a_conversation_takes_a_function_as_its_moderator() -> None:
    def first(transcript: object, speakers: object) -> str | None:
        return "a"

    conversation = Conversation(name="c", speakers=["a", "b"], moderator=first)  # type: ignore[arg-type]
    assert conversation.moderator == Moderated(first)
    assert Conversation(name="c", speakers=["a"]).moderator == RoundRobin()
    with pytest.raises(ConfigurationError, match="moderator takes"):
        Conversation(name="c", speakers=["a"], moderator="round-robin")  # type: ignore[arg-type]


def test_a_conversations_limits_and_policies_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="max_turns must be 1 to 200"):
        Conversation(name="c", speakers=["a"], max_turns=0)
    with pytest.raises(ConfigurationError, match="turn_deadline <= deadline"):
        Conversation(name="c", speakers=["a"], deadline=5, turn_deadline=10)
    with pytest.raises(ConfigurationError, match="'skip' or 'end', not 'retry'"):
        Conversation(name="c", speakers=["a"], on_silent="retry")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="each once"):
        Conversation(name="c", speakers=["a", "a"])
    service = service_of("a")
    with pytest.raises(ConfigurationError, match="'b', not an autonomous agent"):
        service.conversation(Conversation(name="c", speakers=["a", "b"]))


@pytest.mark.parametrize("rounds", [-1, 21, 2.5, True])
def test_a_conversations_tool_rounds_are_a_whole_number_from_0_to_20(rounds: object) -> None:
    with pytest.raises(ConfigurationError, match="max_tool_rounds must be a whole number"):
        Conversation(name="c", speakers=["a"], max_tool_rounds=rounds)  # type: ignore[arg-type]
    assert Conversation(name="c", speakers=["a"], max_tool_rounds=0).max_tool_rounds == 0
