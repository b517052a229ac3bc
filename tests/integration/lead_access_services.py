"""The team of the lead-access test: ``desk``, led by lead_services.py's ``planner`` (it
works ``plan`` tasks with the backlog tools every lead gets), whose one member ``clerk``
works ``note`` items with the ``hold`` tool of lead_services.py (it waits while the file
``HOLD_FILE`` exists), so a test can keep the backlog's first item claimed and the items
waiting on it unclaimed."""

from __future__ import annotations

from pydantic import BaseModel

from ankka.runtime.agents import Service
from ankka.runtime.tasks import Accepts, AutonomousAgent, TaskType
from ankka.runtime.teams import Team
from tests.integration import lead_services
from tests.integration.lead_services import hold


class Note(BaseModel):
    text: str


note = TaskType("note", description="Write a note.", result=Note)

service = Service("desk")
clerk = service.autonomous(
    AutonomousAgent(name="clerk", tools=[hold], accepts=[Accepts(note, budget=3)], model="default")
)
planner = service.autonomous(lead_services.planner)  # it has the hold tool too; unused here
service.team(Team(name="desk", lead=planner, members=[clerk], iterations=12))
