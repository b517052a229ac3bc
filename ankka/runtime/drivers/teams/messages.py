"""Team messages: the tool a team's agents send them with, and how each agent is told them.

Every task of a team's lead, and every task a member works for a team's item, is offered
``team_send_message`` (a built-in tool of the one engine's tool seam, its result recorded as
every result is): a short typed message (:data:`~ankka.runtime.store.team_message_statements.KINDS`)
to one agent of the team or to everyone. Its id is derived from the sending task, the
iteration and the call's place in the answer (as a lead's added item's is), so a call run
again after a restart (its result not recorded yet: tools run at least once) finds the
message it sent and sends nothing new.

An agent is told the messages sent to it (by name, or to everyone by another) at its next
iteration, with the backlog news a lead hears (:func:`team_news`, the same told-once
mechanism, :class:`~ankka.runtime.drivers.tasks.iteration.News`): appended to the newest
message before its next model call, never to what it was already sent, and marked told for
that agent in the commit that records it. A task hears only the messages its creator may
read (its creator's own, or every one when the lead's access lets its creator read the
team's), as the routes show a caller only those.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ankka._kernel.errors import RequestError
from ankka.runtime.declare.autonomous import AutonomousAgent
from ankka.runtime.declare.teams import EVERYONE, SEND_MESSAGE
from ankka.runtime.declare.tools import RunnableTool, ToolOutcome, ToolSpec
from ankka.runtime.drivers.tasks.ending import Builtin
from ankka.runtime.drivers.tasks.iteration import News
from ankka.runtime.drivers.teams.lead import call_place, lead_news, lead_tools, malformed, pick_team
from ankka.runtime.records.delegation import child_id
from ankka.runtime.records.tasks import MAX_ID, TaskRecord
from ankka.runtime.store import team_message_statements as channel
from ankka.runtime.store.database import Transaction
from ankka.runtime.store.team_message_statements import MAX_TEXT, Kind, Message, MessageBody

if TYPE_CHECKING:  # the team host hands these out (it imports this module)
    from ankka.runtime.drivers.teams.backlog import TeamHost

__all__ = ["MAX_TOLD", "SEND_MESSAGE", "message_line", "message_news", "team_news", "team_tools"]

MAX_TOLD = 20  # messages told with one iteration's newest message; the rest at the next


class SendInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    to: str = Field(
        min_length=1,
        max_length=MAX_ID,
        description=f"an agent of the team (its lead or a member), or {EVERYONE!r}",
    )
    kind: Kind = Field(
        description="note: for information; question: you expect an answer; answer: to a "
        "question; blocker: you cannot go on without something"
    )
    text: str = Field(min_length=1, max_length=MAX_TEXT, description="the message, short")
    team: str | None = Field(default=None, max_length=MAX_ID, description="the team")


def _schema(teams: Sequence[str], recipients: Sequence[str]) -> dict[str, object]:
    schema = SendInput.model_json_schema()
    schema.pop("title", None)
    properties = schema["properties"]
    properties["to"]["enum"] = [*recipients, EVERYONE]
    team = properties["team"]
    team.pop("anyOf", None)
    team.update({"type": "string", "enum": list(teams)})
    if len(teams) > 1:
        schema.setdefault("required", []).append("team")
    return schema


@dataclass(frozen=True, slots=True)
class SendMessage(Builtin):
    """``team_send_message`` on ``task`` of ``agent``, which is on ``teams``."""

    spec: ToolSpec
    host: TeamHost
    agent: str
    task: TaskRecord
    teams: tuple[str, ...]

    async def run(self, raw_arguments: str) -> ToolOutcome:
        try:
            given = SendInput.model_validate_json(raw_arguments or "{}")
        except ValidationError as exc:
            return ToolOutcome(f"nothing was sent: {malformed(exc)}", is_error=True)
        place = call_place(SEND_MESSAGE)
        if isinstance(place, ToolOutcome):
            return place
        message = child_id(self.task.id, *place)
        body = MessageBody(self.agent, self.task.id, given.to, given.kind, given.text)
        try:
            team = pick_team(given.team, self.teams, ("are on", "are not on"))
            if given.to == self.agent:
                raise RequestError(f"you are {self.agent!r}: send it to another agent")
            sent, created = await self.host.send(
                team, message, body, created_by=self.task.created_by
            )
        except RequestError as exc:
            return ToolOutcome(f"nothing was sent: {exc}", is_error=True)
        shown = {"id": sent.id, "team": sent.team, "to": sent.body.recipient, "sent": created}
        return ToolOutcome(json.dumps(shown, ensure_ascii=False), is_error=False)


def team_tools(
    host: TeamHost, agent: AutonomousAgent, task: TaskRecord
) -> tuple[RunnableTool, ...]:
    """What ``task`` of ``agent`` gets as an agent of teams: a lead's backlog tools, and
    ``team_send_message`` for the lead and for a member working a team's item."""
    teams = host.teams_of(agent.name, task)
    if not teams:
        return ()  # (a lead is on the teams it leads)
    others = sorted({a for t in teams for a in host.agents_of(t)} - {agent.name})
    about = "; ".join(f"team {t!r}: {', '.join(host.agents_of(t))}" for t in teams)
    description = (
        f"Send a short typed message to another agent of your team ({about}), or to "
        f"{EVERYONE!r}. Each is told it at its next iteration. Answers the message's id."
    )
    spec = ToolSpec(SEND_MESSAGE, description, _schema(teams, others))
    return (*lead_tools(host, agent, task), SendMessage(spec, host, agent.name, task, teams))


def message_line(message: Message) -> str:
    """One message as its recipient is told it: its kind, sender, team, id and text."""
    body = message.body
    sender = body.sender if body.sender_task is not None else f"caller {body.sender!r}"
    to = " to everyone" if body.recipient == EVERYONE else ""
    return (
        f"- [{body.kind}] from {sender}{to} (team {message.team!r}, message {message.id!r}): "
        f"{body.text}"
    )


async def message_news(host: TeamHost, agent: AutonomousAgent, task: TaskRecord) -> News | None:
    """The messages ``task``'s agent is to be told now, with how to mark them told; None when
    it is on no team for this task, or nothing new was sent to it."""
    teams = host.teams_of(agent.name, task)
    if not teams:
        return None
    creator = None if all(host.reads_all(task.created_by, t) for t in teams) else task.created_by
    unread = await host.store.read(
        lambda tx: channel.unread(tx, teams, agent.name, creator=creator, limit=MAX_TOLD)
    )
    if not unread:
        return None
    now = host.clock.now()

    def mark(tx: Transaction) -> None:
        channel.told(tx, agent.name, task.id, unread, now)

    lines = "\n".join(message_line(m) for m in unread)
    return News(f"Team messages (sent to you; answer with {SEND_MESSAGE}):\n{lines}", mark)


async def team_news(host: TeamHost, agent: AutonomousAgent, task: TaskRecord) -> News | None:
    """What ``task`` is to be told at its next iteration: a lead's backlog news, then the
    team messages sent to its agent; marked told together, in the commit that records it."""
    heard = (await lead_news(host, agent, task), await message_news(host, agent, task))
    found = [n for n in heard if n is not None]
    if not found:
        return None
    if len(found) == 1:
        return found[0]

    def mark(tx: Transaction) -> None:
        for news in found:
            news.mark(tx)

    return News("\n\n".join(n.text for n in found), mark)
