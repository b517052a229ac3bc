"""The pods tier's delegating agent (tests/pods/test_pods_delegation.py): examples/team.py's
``lead`` without a researcher of its own, so each ``summary`` it delegates goes to the
runtime of another Agent (the one its Agent's ``spec.delegatesTo`` names, which serves
examples/tasks.py's ``researcher``), over mTLS, as ``ANKKA_PEERS`` says."""

from __future__ import annotations

from ankka.runtime.agents import Service
from ankka.runtime.tasks import Accepts, AutonomousAgent, Delegate
from examples.tasks import summary
from examples.team import report

service = Service("lead")

lead = service.autonomous(
    AutonomousAgent(
        name="lead",
        description="Writes reports from summaries another Agent's researcher makes.",
        instructions=(
            "You write reports. Delegate a summary of each topic to the researcher, all at "
            "once, with delegate__researcher__summary; when every summary is back, finish "
            "with complete_task: one section per summary."
        ),
        accepts=[Accepts(report, budget=8)],
        # By name: the researcher is not served here (a peer serves it), so its runtime's
        # budget for the type is not known here: each child is given 3 iterations (without
        # it, the first would be given all the report's remaining 7, and the second none).
        delegates=[Delegate("researcher", summary, deadline=600, budget=3)],
        model="default",
    )
)
