"""A team and a moderated conversation: the ``newsroom`` team, led by ``editor``, whose
members ``researcher`` (the researcher of examples/tasks.py) and ``writer`` claim the items
of its backlog; and ``standup``, a moderated conversation among the three.

Served by ``ankka serve examples.newsroom:service`` (docs/teams.md). Items are added with
``PUT /v1/teams/newsroom/items/{item}`` (``{"type": "summary" | "draft", "instructions":
"...", "depends_on"?: [...]}``) and read with ``GET /v1/teams/newsroom/items/{item}``: a
``summary`` is claimed by the researcher, a ``draft`` by the writer, each worked as a task of
its own. ``POST /v1/conversations/standup/sessions/{session}`` with ``{"message": "..."}``
runs the standup to its end: each speaks once, in turn. ``examples/newsroom-standin.json``
is a stand-in script for both: a summary of sqlite, a draft depending on it, then the
standup.
"""

from __future__ import annotations

from pydantic import BaseModel

from ankka.runtime.agents import Service
from ankka.runtime.tasks import Accepts, AutonomousAgent, TaskType
from ankka.runtime.teams import Conversation, RoundRobin, Team
from examples import tasks

service = Service("newsroom")


class Draft(BaseModel):
    title: str
    body: str


def has_body(result: Draft) -> str | None:
    """A draft says something."""
    return None if result.body.strip() else "a draft needs a body"


draft = TaskType(
    "draft",
    description="A short article: a title and a body, written from the summaries given.",
    result=Draft,
    rules=[has_body],
)


class Verdict(BaseModel):
    verdict: str


review = TaskType(
    "review",
    description="A verdict on a draft: publish it, or what to change.",
    result=Verdict,
)

researcher = service.autonomous(tasks.researcher)

writer = service.autonomous(
    AutonomousAgent(
        name="writer",
        description="Writes short articles from summaries.",
        instructions=(
            "You write short articles. Use the summaries your task depends on, then finish "
            "with complete_task: a title and a body."
        ),
        accepts=[Accepts(draft, budget=3)],
        model="default",
    )
)

editor = service.autonomous(
    AutonomousAgent(
        name="editor",
        description="Plans the newsroom's work and reviews its drafts.",
        instructions="You lead the newsroom: you plan what is researched and written.",
        accepts=[Accepts(review, budget=3)],
        model="default",
    )
)

newsroom = service.team(
    Team(
        name="newsroom",
        lead=editor,
        members=[researcher, writer],
        description="Researches topics and writes them up.",
        iterations=40,  # the backlog's budget: every item's task is granted what is left
    )
)

standup = service.conversation(
    Conversation(
        name="standup",
        speakers=[editor, researcher, writer],
        moderator=RoundRobin(),
        instructions="A short standup: say in one sentence what you are doing today.",
        max_turns=3,
        deadline=120,
        turn_deadline=30,
    )
)

__all__ = ["Draft", "draft", "editor", "newsroom", "researcher", "service", "standup", "writer"]
