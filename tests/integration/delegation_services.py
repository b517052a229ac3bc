"""A lead whose researcher another runtime serves, with a short deadline for each summary:
``tests.integration.delegation_services:service`` (tests/integration/test_delegation_across.py,
a child that never answers in time)."""

from __future__ import annotations

from ankka.runtime.agents import Service
from ankka.runtime.tasks import Accepts, AutonomousAgent, Delegate
from examples.tasks import summary
from examples.team import report

service = Service("hasty-team")

DEADLINE = 3.0

lead = service.autonomous(
    AutonomousAgent(
        name="lead",
        instructions="Delegate a summary of each topic, then write the report.",
        accepts=[Accepts(report, budget=8)],
        # Served elsewhere: each child is given at most 4 of the lead's 8 iterations (the
        # second what remains, 3), so the lead has none left until their grants come back.
        delegates=[Delegate("researcher", summary, deadline=DEADLINE, budget=4)],
        model="default",
    )
)
