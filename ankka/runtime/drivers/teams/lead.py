"""The lead plans: the tools a team's lead gets on its tasks to re-plan its teams' backlogs.

The team host hands the task driver these tools (:attr:`Workbench.team_tools`, with the
message tool of :mod:`ankka.runtime.drivers.teams.messages`) for every task of an agent that
leads a team; they are built-in tools of the one engine's tool seam, run by its executor like
any tool, their results recorded by the task driver as every result is:

- ``backlog_add_item``: add an item (type, instructions, dependencies, optional assignee,
  priority) to a team's backlog. Its id is derived from the lead's task, the iteration and
  the call's place in the answer (as a delegated child's is), so the call run again after a
  restart (its result not recorded yet: tools run at least once) finds the item it added and
  adds nothing;
- ``backlog_cancel_item``: cancel an item (and what waits on it), as the cancel route does;
- ``backlog_prioritise_item``: give an item a new priority.

And it hears progress (:func:`lead_news`): the items a lead's task added that have ended
(completed, failed, cancelled) are told to it with the newest message before its next model
call, each with its id, the member agent that worked it and its outcome; they are marked told
in the commit that records that message, so each is told once, across restarts too.

Each acts for the lead's task's creator, as the routes act for their caller, checked by the
same :meth:`TeamHost.permitted`: an item is added as the creator's, depending only on items
the creator may read, and only an item the creator may change is cancelled or re-prioritised
(a lead's task created by one caller never touches another's item the policy keeps from it).

Each answers JSON (the item's id, state and priority); a refusal (a type no member accepts,
an item not on the backlog or not the creator's to read, one the creator may not change, one
that has ended) is an error result the model sees, naming what was wrong; nothing changes.
The backlog's budget covers the items the lead adds as it covers any.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ankka._kernel.errors import RequestError
from ankka.runtime.declare.autonomous import AutonomousAgent
from ankka.runtime.declare.teams import LEAD_TOOLS
from ankka.runtime.declare.tools import RunnableTool, ToolOutcome, ToolSpec
from ankka.runtime.drivers.tasks.ending import Builtin
from ankka.runtime.drivers.tasks.iteration import News
from ankka.runtime.engine.executor import ANSWER, RUNNING
from ankka.runtime.records.delegation import child_id
from ankka.runtime.records.iterations import iteration_of
from ankka.runtime.records.tasks import MAX_DEPENDENCIES, MAX_ID, MAX_INSTRUCTIONS, TaskRecord
from ankka.runtime.store import team_statements as backlog
from ankka.runtime.store.database import Transaction
from ankka.runtime.store.team_statements import MAX_PRIORITY, Item, ItemBody

if TYPE_CHECKING:  # the team host hands these tools out (it imports this module)
    from ankka.runtime.drivers.teams.backlog import TeamHost

__all__ = [
    "ADD_ITEM",
    "CANCEL_ITEM",
    "LEAD_TOOLS",
    "PRIORITISE_ITEM",
    "call_place",
    "lead_item_id",
    "lead_news",
    "lead_tools",
    "malformed",
    "news_line",
    "pick_team",
]

ADD_ITEM, CANCEL_ITEM, PRIORITISE_ITEM = LEAD_TOOLS


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")
    team: str | None = Field(
        default=None, max_length=MAX_ID, description="the team (optional when you lead one)"
    )


class AddInput(_Input):
    type: str = Field(min_length=1, max_length=MAX_ID, description="the item's task type")
    instructions: str = Field(min_length=1, max_length=MAX_INSTRUCTIONS)
    depends_on: list[str] = Field(
        default_factory=list,
        max_length=MAX_DEPENDENCIES,
        description="ids of items on the backlog that must complete first",
    )
    assignee: str | None = Field(
        default=None, max_length=MAX_ID, description="the member that must work it"
    )
    priority: int = Field(
        default=0,
        ge=-MAX_PRIORITY,
        le=MAX_PRIORITY,
        description="higher is claimed first; ties in the order added",
    )


class CancelInput(_Input):
    item: str = Field(min_length=1, max_length=MAX_ID, description="the item's id")


class PrioritiseInput(_Input):
    item: str = Field(min_length=1, max_length=MAX_ID, description="the item's id")
    priority: int = Field(ge=-MAX_PRIORITY, le=MAX_PRIORITY, description="higher is first")


def lead_item_id(task: str, iteration: int, index: int) -> str:
    """The item the ``index``-th call (from 0) of ``task``'s iteration ``iteration`` adds."""
    return child_id(task, iteration, index)


def _schema(model: type[BaseModel], teams: Sequence[str]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    team = schema["properties"]["team"]
    team.pop("anyOf", None)
    team.update({"type": "string", "enum": list(teams)})
    if len(teams) > 1:
        schema.setdefault("required", []).append("team")
    return schema


def _answer(item: Item, **more: Any) -> ToolOutcome:
    shown = {"id": item.id, "team": item.team, "state": item.state, "priority": item.priority}
    return ToolOutcome(json.dumps({**shown, **more}, ensure_ascii=False), is_error=False)


def malformed(exc: ValidationError) -> str:
    """What was wrong with a tool's input, as its error result says it."""
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"]) or "the input"
    return f"{where}: {error['msg']}"


def _malformed(exc: ValidationError) -> ToolOutcome:
    return ToolOutcome(f"the input did not decode: {malformed(exc)}", is_error=True)


def pick_team(given: str | None, teams: Sequence[str], verbs: tuple[str, str]) -> str:
    """The team a tool's call names (``given``, or the one of ``teams`` when it names none),
    else a refusal saying ``you <verbs[0]> <teams>`` (``verbs[1]``: the negation)."""
    if given is None and len(teams) == 1:
        return teams[0]
    if given in teams:
        return str(given)
    mine = ", ".join(teams)
    if given is None:
        raise RequestError(f"name the team: you {verbs[0]} {mine}")
    raise RequestError(f"you {verbs[1]} team {given!r}; you {verbs[0]} {mine}")


def call_place(tool: str) -> tuple[int, int] | ToolOutcome:
    """The iteration of the task's answer the running call is of and its place in it (from
    0): what a tool derives the id of what it makes from; an error result outside one."""
    call, answer = RUNNING.get(), ANSWER.get()
    iteration = iteration_of(answer.turn) if answer is not None else None
    if call is None or answer is None or iteration is None:
        return ToolOutcome(f"{tool} runs only as a call of a task's answer", True)
    return iteration, next(i for i, asked in enumerate(answer.tool_calls) if asked.id == call.id)


@dataclass(frozen=True, slots=True)
class _LeadTool(Builtin):
    spec: ToolSpec
    host: TeamHost
    task: TaskRecord
    teams: tuple[str, ...]

    def _team(self, given: str | None) -> str:
        return pick_team(given, self.teams, ("lead", "do not lead"))

    @property
    def creator(self) -> str:
        """Whom the tool acts for: the lead's task's creator."""
        return self.task.created_by

    @property
    def role(self) -> str:
        """How a refusal names :attr:`creator`."""
        return "this task's creator"


@dataclass(frozen=True, slots=True)
class AddItem(_LeadTool):
    async def run(self, raw_arguments: str) -> ToolOutcome:
        try:
            given = AddInput.model_validate_json(raw_arguments or "{}")
        except ValidationError as exc:
            return _malformed(exc)
        place = call_place(ADD_ITEM)
        if isinstance(place, ToolOutcome):
            return place
        item = lead_item_id(self.task.id, *place)
        body = ItemBody(
            given.type,
            given.instructions,
            tuple(given.depends_on),
            given.assignee,
            given.priority,
        )
        try:
            team = self._team(given.team)
            found, created = await self.host.put(
                team, item, body, created_by=self.creator, planned_by=self.task.id, role=self.role
            )
        except RequestError as exc:
            return ToolOutcome(f"nothing was added: {exc}", is_error=True)
        return _answer(found, added=created)


@dataclass(frozen=True, slots=True)
class CancelItem(_LeadTool):
    async def run(self, raw_arguments: str) -> ToolOutcome:
        try:
            given = CancelInput.model_validate_json(raw_arguments or "{}")
            team = self._team(given.team)
            found = await self.host.cancel(team, given.item, by=self.creator, role=self.role)
            return _answer(found)
        except ValidationError as exc:
            return _malformed(exc)
        except RequestError as exc:
            return ToolOutcome(f"nothing was cancelled: {exc}", is_error=True)


@dataclass(frozen=True, slots=True)
class PrioritiseItem(_LeadTool):
    async def run(self, raw_arguments: str) -> ToolOutcome:
        try:
            given = PrioritiseInput.model_validate_json(raw_arguments or "{}")
            team = self._team(given.team)
            found = await self.host.reprioritise(
                team, given.item, given.priority, by=self.creator, role=self.role
            )
            return _answer(found)
        except ValidationError as exc:
            return _malformed(exc)
        except RequestError as exc:
            return ToolOutcome(f"no priority was changed: {exc}", is_error=True)


def _about(host: TeamHost, teams: Sequence[str]) -> str:
    parts = []
    for name in teams:
        team = host.teams[name]
        types = sorted(
            {a.task_type.name for m in team.member_names for a in host.tasks.agents[m].accepts}
        )
        parts.append(
            f"team {name!r} (members {', '.join(team.member_names)}; types {', '.join(types)})"
        )
    return "; ".join(parts)


def lead_tools(
    host: TeamHost, agent: AutonomousAgent, task: TaskRecord
) -> tuple[RunnableTool, ...]:
    """The backlog tools ``agent`` gets on ``task``: none unless it leads a team."""
    teams = tuple(name for name, team in host.teams.items() if team.lead == agent.name)
    if not teams:
        return ()
    about = _about(host, teams)
    add = (
        f"Add an item to the backlog of {about}. Members claim ready items (all they depend "
        "on completed), the highest priority first, and work each as a task. Answers the "
        "item's id (use it in depends_on, to cancel or re-prioritise it), state and priority."
    )
    cancel = "Cancel a backlog item (its work stops); the items waiting on it are cancelled."
    prioritise = "Give a backlog item a new priority: higher is claimed first."
    made: list[RunnableTool] = [
        AddItem(ToolSpec(ADD_ITEM, add, _schema(AddInput, teams)), host, task, teams),
        CancelItem(ToolSpec(CANCEL_ITEM, cancel, _schema(CancelInput, teams)), host, task, teams),
        PrioritiseItem(
            ToolSpec(PRIORITISE_ITEM, prioritise, _schema(PrioritiseInput, teams)),
            host,
            task,
            teams,
        ),
    ]
    return tuple(made)


NEWS_RESULT = 400  # characters of a completed item's result shown in its news


def news_line(item: Item) -> str:
    """One ended item as a lead is told of it: its id, team, type, outcome and agent."""
    agent = item.claimed_by[0] if item.claimed_by is not None else None
    by = f" by {agent}" if agent is not None else " (no member had claimed it)"
    head = f"- item {item.id!r} of team {item.team!r} ({item.body.type}) {item.state}{by}"
    if item.state == "completed":
        shown = json.dumps(item.result, ensure_ascii=False)
        if len(shown) > NEWS_RESULT:
            shown = shown[:NEWS_RESULT] + "..."
        return f"{head}; result: {shown}"
    return f"{head}; reason: {item.reason}"


async def lead_news(host: TeamHost, agent: AutonomousAgent, task: TaskRecord) -> News | None:
    """What ``task`` (of a team's lead) is to be told now: the ends of the items it added,
    with how to mark them told; None for an agent that leads no team, or nothing new."""
    if not any(team.lead == agent.name for team in host.teams.values()):
        return None
    ended = await host.store.read(lambda tx: backlog.news(tx, task.id))
    if not ended:
        return None
    now = host.clock.now()

    def mark(tx: Transaction) -> None:
        backlog.told(tx, task.id, ended, now)

    lines = "\n".join(news_line(item) for item in ended)
    return News(f"Backlog news (items you added that have ended):\n{lines}", mark)
