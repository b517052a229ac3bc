"""Autonomous agents that delegate: ``lead`` writes a ``report`` by delegating ``summary``
tasks to ``researcher`` (the researcher of examples/tasks.py).

Served by ``ankka serve examples.team:service``; a report is asked for with
``PUT /v1/agents/lead/tasks/{id}`` (``{"type": "report", "instructions": "..."}``) and read
with ``GET /v1/tasks/{id}``, which shows its ``children`` and its ``tree_usage``. The lead's
model is given one tool per delegation, ``delegate__researcher__summary``; each call makes a
child task the researcher works on its own, and the child's end comes back as that call's
result. The lead's budget of 8 iterations covers its children's: each child is given at most
what remains (docs/delegation.md). ``examples/team-standin.json`` is a stand-in script for it.
"""

from __future__ import annotations

from pydantic import BaseModel

from ankka.runtime.agents import Service
from ankka.runtime.tasks import Accepts, AutonomousAgent, Delegate, TaskType
from examples import tasks
from examples.tasks import summary

service = Service("team")


class Report(BaseModel):
    title: str
    sections: list[str]


def has_sections(result: Report) -> str | None:
    """A report says something: at least one section."""
    return None if result.sections else "a report needs at least one section"


report = TaskType(
    "report",
    description="A report on a subject, as a title and one section per topic.",
    result=Report,
    rules=[has_sections],
)

# The researcher of examples/tasks.py, served here too.
researcher = service.autonomous(tasks.researcher)

lead = service.autonomous(
    AutonomousAgent(
        name="lead",
        description="Writes reports from summaries its researcher makes.",
        instructions=(
            "You write reports. Delegate a summary of each topic to the researcher, all at "
            "once, with delegate__researcher__summary; when every summary is back, finish "
            "with complete_task: one section per summary. If a summary failed, say so in its "
            "section, or finish with fail_task when nothing is left to report."
        ),
        accepts=[Accepts(report, budget=8)],
        delegates=[Delegate(researcher, summary)],
        model="default",
    )
)

__all__ = ["Report", "lead", "report", "researcher", "service"]
