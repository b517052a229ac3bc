"""An autonomous agent: ``researcher`` works ``summary`` tasks with a ``lookup`` tool.

Served by ``ankka serve examples.tasks:service``; a task is created with
``PUT /v1/agents/researcher/tasks/{id}`` and read with ``GET /v1/tasks/{id}`` (see
docs/http-api.md). The model looks topics up, then ends the task with ``complete_task``
(a ``Summary``) or ``fail_task`` (a reason); a summary with no points is refused by a rule
and goes back to the model, within the same budget of 5 iterations.
"""

from __future__ import annotations

from pydantic import BaseModel

from ankka.runtime.agents import Service
from ankka.runtime.tasks import Accepts, AutonomousAgent, TaskType
from ankka.runtime.tools import tool

service = Service("tasks")

# A fixed table keeps the example deterministic and offline; a real tool would search.
_NOTES = {
    "ankka": "ankka is an agent platform for Kubernetes, in Python.",
    "sqlite": "SQLite is an embedded database kept in one file.",
    "postgresql": "PostgreSQL is a database server shared by many processes.",
}


class Summary(BaseModel):
    title: str
    points: list[str]


def has_points(result: Summary) -> str | None:
    """A summary says something: at least one point."""
    return None if result.points else "a summary needs at least one point"


summary = TaskType(
    "summary",
    description="Summarise a topic as a title and a list of short points.",
    result=Summary,
    rules=[has_points],
)


@tool
def lookup(topic: str) -> str:
    """What is known about a topic."""
    note = _NOTES.get(topic.strip().lower())
    if note is None:
        raise ValueError(f"nothing known about {topic!r}; known: {', '.join(_NOTES)}")
    return note


researcher = service.autonomous(
    AutonomousAgent(
        name="researcher",
        description="Researches a topic and summarises it.",
        instructions=(
            "You research topics. Look each topic up with lookup, then finish with complete_task. "
            "If a topic cannot be looked up, finish with fail_task and say why."
        ),
        tools=[lookup],
        accepts=[Accepts(summary, budget=5)],
        model="default",
    )
)

__all__ = ["Summary", "lookup", "researcher", "service", "summary"]
