"""The team of the backlog fault test: ``crew``, whose one member is the researcher of
examples/tasks.py, two member instances per process, over a backlog whose budget is what
:data:`ITEMS` summaries of two iterations each need, and a little more."""

from __future__ import annotations

from ankka.runtime.agents import Service
from ankka.runtime.tasks import AutonomousAgent
from ankka.runtime.teams import Team
from examples import tasks

ITEMS = 200
BUDGET = 2 * ITEMS + 30

service = Service("crew")

researcher: AutonomousAgent = service.autonomous(tasks.researcher)
lead = service.autonomous(
    AutonomousAgent(name="lead", accepts=tasks.researcher.accepts, model="default")
)
service.team(Team(name="crew", lead=lead, members=[researcher], iterations=BUDGET, instances=2))
