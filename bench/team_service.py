"""The service of ``bench/team_backlog.py``: the researcher of examples/tasks.py as the one
member of team ``bench`` (``$BENCH_TEAM_INSTANCES`` member instances per process, no backlog
budget), a request agent ``plain`` and a one-speaker conversation ``solo`` of that model."""

from __future__ import annotations

import os

from ankka.runtime.agents import Service, Turn, TurnRequest
from ankka.runtime.tasks import AutonomousAgent
from ankka.runtime.teams import Conversation, Team
from examples import tasks

service = Service("bench")

researcher = service.autonomous(tasks.researcher)
lead = service.autonomous(
    AutonomousAgent(name="lead", accepts=tasks.researcher.accepts, model="default")
)
service.team(
    Team(
        name="bench",
        lead=lead,
        members=[researcher],
        instances=int(os.environ.get("BENCH_TEAM_INSTANCES", "2")),
    )
)


@service.agent("plain")
def plain(request: TurnRequest) -> Turn:
    """One model call a turn."""
    return Turn(message=request.message, instructions=researcher.instructions)


service.conversation(
    Conversation(name="solo", speakers=[researcher], max_turns=10, deadline=600, turn_deadline=60)
)
