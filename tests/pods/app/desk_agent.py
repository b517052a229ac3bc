"""The approvals' agent of the pods tier (tests/pods/test_workload.py): the autonomous
``researcher`` of ``examples.tasks``' summary type, with a ``publish`` tool every call of which
waits for a person's decision, so ``ankka approve`` reaches a runtime pod."""

from __future__ import annotations

from ankka.runtime.agents import Service
from ankka.runtime.tasks import Accepts, AutonomousAgent
from ankka.runtime.tools import tool
from examples.tasks import summary

service = Service("desk")


@tool(requires_approval=True)
def publish(topic: str) -> str:
    """Publish what is known about a topic (every call waits for a person)."""
    return f"{topic} is published."


service.autonomous(
    AutonomousAgent(
        name="researcher",
        instructions="Publish the topic, then complete the task.",
        tools=[publish],
        accepts=[Accepts(summary, budget=5)],
    )
)
