"""The team of the lead tests: ``desk``, led by ``planner`` (it works ``plan`` tasks, with the
backlog tools every lead gets and a ``hold`` tool that waits while a file ``HOLD_FILE``
names exists, so a test can kill the runtime between one tool's commit and the next model
call), over the researcher of examples/tasks.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pydantic import BaseModel

from ankka.runtime.agents import Service
from ankka.runtime.tasks import Accepts, AutonomousAgent, TaskType
from ankka.runtime.teams import Team
from ankka.runtime.tools import tool
from examples import tasks


class Plan(BaseModel):
    note: str


plan = TaskType("plan", description="Plan the team's work onto its backlog.", result=Plan)


@tool
def hold(gate: str = "") -> str:
    """Wait while the test holds the runtime here (run in a thread, as a plain tool is): while
    the file ``HOLD_FILE`` + ``gate`` exists."""
    held = Path(os.environ.get("HOLD_FILE", "/nonexistent") + gate)
    while held.exists():
        time.sleep(0.05)
    return "released"


service = Service("desk")
researcher = service.autonomous(tasks.researcher)
planner = service.autonomous(
    AutonomousAgent(
        name="planner",
        instructions="You plan the desk's work onto its backlog.",
        tools=[hold],
        accepts=[Accepts(plan, budget=5)],
        model="default",
    )
)
service.team(Team(name="desk", lead=planner, members=[researcher], iterations=12))
