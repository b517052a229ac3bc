"""The agents of the delegation chaos harness (tests/integration/test_delegation_chaos.py):
``tests.integration.chaos_services:service``, four levels of autonomous agents, ``l0`` to
``l3``, each accepting ``job`` tasks, ``lN`` delegating jobs to ``lN+1`` (so a tree is at most
three levels below its root, and never a cycle). Every agent has the crash tests' tool
``lookup`` (tests/integration/task_services.py), which writes a line per run to
``$ANKKA_TEST_TOOL_LOG`` and takes ``$ANKKA_TEST_TOOL_SECONDS``, so a kill can land while it
runs."""

from __future__ import annotations

from pydantic import BaseModel

from ankka.runtime.agents import Service
from ankka.runtime.tasks import Accepts, AutonomousAgent, Delegate, TaskType
from tests.integration.task_services import lookup

service = Service("chaos")

LEVELS = 4
# Each task makes at most two model calls and at most four children: the budgets cover a
# full subtree, so no planned delegation is refused for want of budget.
BUDGETS = (400, 80, 16, 3)


class Done(BaseModel):
    note: str


job = TaskType("job", description="A job, done or failed.", result=Done)


agents: list[AutonomousAgent] = []
for level in reversed(range(LEVELS)):
    agents.insert(
        0,
        service.autonomous(
            AutonomousAgent(
                name=f"l{level}",
                instructions="Do the job: look it up, delegate parts of it, then finish.",
                tools=[lookup],
                accepts=[Accepts(job, budget=BUDGETS[level])],
                delegates=[Delegate(agents[0], job)] if agents else [],
                model="default",
            )
        ),
    )

__all__ = ["LEVELS", "job", "service"]
