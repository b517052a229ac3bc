"""The team host: each process's member instances claim the backlog's items and work them.

For every team the service declares, this process runs ``Team.instances`` member instances of
each member agent (``team.<team>.<tag>.<k>``, ``tag`` derived from the task host's lease
owner, so on SQLite, where the owner is ``local``, a restarted process has the same ones). A
poll, every ``poll_seconds``: renew this process's claims, settle the items whose tasks ended,
return to the backlog the items whose claims ran out (another process died holding them),
then let each member instance with no claim claim the ready item its agent accepts of the
highest priority (of those, the first added). A
claimed item is a task assigned to that instance; the task host works it like any task. An
item whose claim ran out is claimed again by another instance of the same agent, which
carries its task on from its journal session: no recorded model call is made again.

The task host leaves alone the member instances that are not this process's
(:attr:`TaskHost.reserved`): an instance of a dead process is ended with its claim, never
resumed behind it.

What the HTTP routes and the lead's backlog tools ask goes through the same methods here, and
each checks its principal (the caller; for a lead's tool, the lead's task's creator) with
:meth:`TeamHost.permitted`: an item is its creator's, the platform's and of whoever the
team's lead's access names (:mod:`ankka.runtime.declare.policy`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from ankka._kernel.errors import NotFound, RequestError, StoreError
from ankka._kernel.identity import is_platform
from ankka.runtime.declare.policy import NotPermitted, Right
from ankka.runtime.declare.teams import Team
from ankka.runtime.drivers.tasks.host import TaskHost
from ankka.runtime.drivers.tasks.iteration import told
from ankka.runtime.drivers.teams.messages import team_news, team_tools
from ankka.runtime.drivers.teams.watch import TeamWatch
from ankka.runtime.records.tasks import (
    MAX_ID,
    MEMBER_INSTANCE_PREFIX,
    Conflict,
    TaskRecord,
    check_id,
)
from ankka.runtime.store import team_event_statements as team_log
from ankka.runtime.store import team_message_statements as channel
from ankka.runtime.store import team_statements as backlog
from ankka.runtime.store.database import Transaction
from ankka.runtime.store.tasks import create_tables
from ankka.runtime.store.team_message_statements import EVERYONE, Message, MessageBody
from ankka.runtime.store.team_statements import Claimed, Grant, Item, ItemBody

__all__ = ["MEMBER_PREFIX", "TeamHost"]

log = logging.getLogger("ankka.runtime.teams")

MEMBER_PREFIX = MEMBER_INSTANCE_PREFIX
T = TypeVar("T")


@dataclass
class _Member:
    agent: str
    slot: int
    generation: int = 0


class TeamHost:
    """Runs the service's teams on the task host's store; ``async with`` owns its loop."""

    def __init__(self, tasks: TaskHost, *, poll_seconds: float | None = None) -> None:
        self.tasks = tasks
        self.store = tasks.store
        self.clock = tasks.clock
        self.policy = tasks.context.policy
        self.teams: dict[str, Team] = tasks.service.teams
        self.poll_seconds = poll_seconds if poll_seconds is not None else tasks.poll_seconds
        self.lease_seconds = tasks.lease_seconds
        self.owner = tasks.owner
        self.tag = hashlib.sha256(self.owner.encode()).hexdigest()[:10]
        self._members: dict[str, list[_Member]] = {
            team.name: [
                _Member(agent, slot)
                for agent in team.member_names
                for slot in range(team.instances)
            ]
            for team in self.teams.values()
        }
        self._loop: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self.watch = TeamWatch(self.store.notices())
        tasks.reserved = self._foreign
        if self.teams:  # the leads' backlog tools, everyone's messages (drivers/teams/)
            tasks.bench = replace(
                tasks.bench,
                team_tools=partial(team_tools, self),
                team_news=partial(team_news, self),
            )

    def instance_of(self, team: str, member: _Member) -> str:
        base = f"{MEMBER_PREFIX}{team}.{self.tag}.{member.slot}"
        return base if member.generation == 0 else f"{base}.{member.generation}"

    def _mine(self) -> set[tuple[str, str]]:
        return {
            (m.agent, self.instance_of(team, m))
            for team, members in self._members.items()
            for m in members
        }

    def _foreign(self, key: tuple[str, str]) -> bool:
        """A member instance of another process's: the task host must not take it up."""
        return key[1].startswith(MEMBER_PREFIX) and key not in self._mine()

    async def __aenter__(self) -> TeamHost:
        if self.teams:
            await create_tables(self.store, (*backlog.SCHEMA, *channel.SCHEMA))
            self._loop = asyncio.create_task(self._run(), name="ankka-team-host")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
            self._loop = None

    async def _run(self) -> None:
        last_renewal = float("-inf")
        while True:
            try:
                now = self.clock.now().timestamp()
                if now - last_renewal >= self.lease_seconds / 3:
                    await self._renew(now + self.lease_seconds)
                    last_renewal = now
                for team in self.teams.values():
                    await self._tick(team)
            except StoreError as exc:
                log.warning("the team host could not reach the store: %s", exc)
            except Exception:
                log.exception("the team host failed a poll; it polls again")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_seconds):
                    await self._wake.wait()
            self._wake.clear()

    async def _write(self, team: str, work: Callable[[Transaction], T]) -> T:
        """``work`` in one (serial) write, after which ``team``'s event streams are told
        where its log stands (:class:`TeamWatch`)."""

        def both(tx: Transaction) -> tuple[T, int]:
            return work(tx), team_log.head(tx, team)

        value, head = await self.store.write(both)
        self.watch.moved(team, head)
        return value

    async def _renew(self, until: float) -> None:
        await self.store.write(lambda tx: backlog.renew(tx, self.owner, until))

    async def _tick(self, team: Team) -> None:
        stamp = self.clock.now()
        now = stamp.timestamp()
        await self._write(team.name, lambda tx: backlog.settle(tx, team.name, stamp))
        back = await self._write(team.name, lambda tx: backlog.expire(tx, team.name, now, stamp))
        for item in back:
            log.warning(
                "item %s/%s came back to the backlog: its claim ran out", team.name, item.id
            )
        claimed = False
        for member in self._members[team.name]:
            claimed = await self._claim(team, member) or claimed
        if claimed:
            self.tasks.poke()

    async def _claim(self, team: Team, member: _Member) -> bool:
        agent = self.tasks.agents[member.agent]
        accepts = {a.task_type.name: Grant(a.budget, a.tokens) for a in agent.accepts}
        instance = self.instance_of(team.name, member)
        stamp = self.clock.now()
        until = stamp.timestamp() + self.lease_seconds

        def claim(tx: Any) -> Claimed | list[Item] | None:
            return backlog.claim_next(
                tx,
                team.name,
                member=(member.agent, instance),
                owner=self.owner,
                until=until,
                accepts=accepts,
                budget=(team.iterations, team.tokens),
                now=stamp,
            )

        try:
            done = await self._write(team.name, claim)
        except Conflict:
            # This instance was ended (its claim ran out while this process was stalled):
            # its id is never used again, so the member goes on under the next one.
            member.generation += 1
            return False
        if isinstance(done, Claimed):
            self.tasks.notifier.publish(
                "task_assigned", agent=member.agent, instance=instance, task=done.item.task
            )
            return True
        return False

    # -- what the HTTP API and the lead's tools ask ------------------------------------------

    def team(self, name: str) -> Team:
        found = self.teams.get(name)
        if found is None:
            known = ", ".join(sorted(self.teams)) or "none"
            raise NotFound(f"there is no team {name!r} (teams: {known})")
        return found

    def may(self, principal: str, right: Right, *, team: str, creator: str) -> bool:
        """Whether ``principal`` holds ``right`` over an item ``creator`` added to ``team``."""
        lead = str(self.team(team).lead)
        return self.policy.allows(principal, right, creator=creator, agent=lead)

    def permitted(self, item: Item, principal: str, right: Right, *, role: str = "caller") -> Item:
        """``item``, when ``principal`` holds ``right`` over it; else NotPermitted (403), naming
        the principal as ``role`` (the caller, or a lead's task's creator) and the right."""
        if not self.may(principal, right, team=item.team, creator=item.created_by):
            raise NotPermitted(
                f"{role} {principal!r} may not {'read' if right == 'read' else 'change'} item "
                f"{item.id!r} of team {item.team!r}: it is its creator's, the platform's, and "
                "of whoever its lead's access names"
            )
        return item

    def _check_body(self, team: Team, body: ItemBody) -> None:
        takers = [
            m for m in team.member_names if self.tasks.agents[m].accepted(body.type) is not None
        ]
        if not takers:
            raise RequestError(
                f"no member of team {team.name!r} accepts task type {body.type!r} "
                f"(members: {', '.join(team.member_names)})"
            )
        if body.assignee is not None and body.assignee not in takers:
            raise RequestError(
                f"assignee {body.assignee!r} is not a member of team {team.name!r} that accepts "
                f"task type {body.type!r} (those that do: {', '.join(takers)})"
            )
        for dependency in body.depends_on:
            check_id(dependency, "dependency")

    async def put(
        self,
        team: str,
        item: str,
        body: ItemBody,
        *,
        created_by: str,
        planned_by: str | None = None,
        role: str = "caller",
    ) -> tuple[Item, bool]:
        """Add ``item`` (``planned_by``: the lead's task that added it, which hears its end).
        Every item it depends on must be one ``created_by`` may read (else it is answered as
        one not on the backlog); an item sent again must be one ``created_by`` may change."""
        declared = self.team(team)
        check_id(item, "item")
        self._check_body(declared, body)
        now = self.clock.now()

        def may_read(creator: str) -> bool:
            return self.may(created_by, "read", team=team, creator=creator)

        found, created = await self._write(
            team,
            lambda tx: backlog.put(
                tx,
                team,
                item,
                body,
                created_by=created_by,
                may_read=may_read,
                now=now,
                planned_by=planned_by,
            ),
        )
        self._wake.set()
        return self.permitted(found, created_by, "write", role=role), created

    async def get(self, team: str, item: str, *, by: str, role: str = "caller") -> Item:
        """``item``, when ``by`` may read it."""
        return self.permitted(await self._get(team, item), by, "read", role=role)

    async def _get(self, team: str, item: str) -> Item:
        self.team(team)
        found = await self.store.read(lambda tx: backlog.get(tx, team, item))
        if found is None:
            raise NotFound(f"team {team!r} has no item {item!r}")
        return found

    async def items(self, team: str, *, by: str) -> Sequence[Item]:
        """The items of ``team``'s backlog ``by`` may read, in the order they were added."""
        self.team(team)
        found: list[Item] = await self.store.read(lambda tx: backlog.items(tx, team))
        return [i for i in found if self.may(by, "read", team=team, creator=i.created_by)]

    async def wait(self, team: str, item: str, seconds: float, *, by: str) -> Item:
        """The item once it is final, or as it stands after ``seconds`` (``by`` may read it)."""
        deadline = self.clock.monotonic() + seconds
        while True:
            found = await self.get(team, item, by=by)
            left = deadline - self.clock.monotonic()
            if found.final or left <= 0:
                return found
            await asyncio.sleep(min(left, 0.25))

    async def cancel(self, team: str, item: str, *, by: str, role: str = "caller") -> Item:
        """Cancel ``item``, when ``by`` may change it: see :func:`backlog.cancel`."""
        self.permitted(await self._get(team, item), by, "write", role=role)
        now = self.clock.now()
        found, ended = await self._write(team, lambda tx: backlog.cancel(tx, team, item, now))
        told(self.tasks.bench, ended)
        self.tasks.poke()
        return found

    async def reprioritise(
        self, team: str, item: str, priority: int, *, by: str, role: str = "caller"
    ) -> Item:
        """Give ``item`` a new priority, when ``by`` may change it: see
        :func:`backlog.reprioritise`."""
        self.permitted(await self._get(team, item), by, "write", role=role)
        now = self.clock.now()
        found: Item = await self._write(
            team, lambda tx: backlog.reprioritise(tx, team, item, priority, now)
        )
        return found

    async def claims(self, team: str) -> list[tuple[str, int, str, str, str, str]]:
        self.team(team)
        found: list[tuple[str, int, str, str, str, str]] = await self.store.read(
            lambda tx: backlog.claims(tx, team)
        )
        return found

    # -- the team's messages (docs/teams.md, "Team messages") ---------------------------------

    def agents_of(self, team: str) -> tuple[str, ...]:
        """The agents of ``team``: its lead, then its members."""
        declared = self.team(team)
        return (str(declared.lead), *declared.member_names)

    def teams_of(self, agent: str, task: TaskRecord) -> tuple[str, ...]:
        """The teams ``task`` of ``agent`` works for: those ``agent`` leads (every task of a
        lead), and the team whose item it works (a task assigned to a member instance of this
        process's)."""
        found = [name for name, team in self.teams.items() if team.lead == agent]
        for name, members in self._members.items():
            if name not in found and any(
                m.agent == agent and self.instance_of(name, m) == task.instance for m in members
            ):
                found.append(name)
        return tuple(found)

    def reads_all(self, principal: str, team: str) -> bool:
        """Whether ``principal`` may read every message of ``team`` (the platform, or whom the
        lead's access gives read); else only those sent for it."""
        lead = str(self.team(team).lead)
        return is_platform(principal) or self.policy.access(lead).grants(principal, "read")

    async def send(
        self, team: str, message: str, body: MessageBody, *, created_by: str
    ) -> tuple[Message, bool]:
        """Send ``message`` on ``team``'s channel for ``created_by`` (or find it, sent under
        its id before with the same body: False). Its recipient must be an agent of the
        team, or everyone."""
        agents = self.agents_of(team)
        check_id(message, "message")
        if body.recipient not in (*agents, EVERYONE):
            raise RequestError(
                f"recipient {body.recipient[:MAX_ID]!r} is not an agent of team {team!r} "
                f"(its lead {agents[0]}, members {', '.join(agents[1:])}); name one of them, "
                f"or {EVERYONE!r}"
            )
        channel.check_body(body)
        now = self.clock.now()
        sent: tuple[Message, bool] = await self._write(
            team, lambda tx: channel.put(tx, team, message, body, created_by=created_by, now=now)
        )
        return sent

    async def messages(
        self, team: str, *, by: str, after: int = 0, limit: int = 100
    ) -> list[Message]:
        """At most ``limit`` of the messages of ``team`` ``by`` may read after ``seq``
        ``after``, in the order sent."""
        self.team(team)
        creator = None if self.reads_all(by, team) else by
        found: list[Message] = await self.store.read(
            lambda tx: channel.page(tx, team, after=after, limit=limit, creator=creator)
        )
        return found

    # -- watching a team (docs/teams.md, "Watching a team") ----------------------------------

    async def events(
        self, team: str, *, by: str, after: int, limit: int
    ) -> tuple[list[team_log.TeamEvent], int]:
        """At most ``limit`` of ``team``'s events after seq ``after`` that ``by`` may read
        (its own items' and messages', or every one when it reads all of the team's), and
        the seq read up to (:func:`team_log.after`)."""
        self.team(team)
        creator = None if self.reads_all(by, team) else by
        found: tuple[list[team_log.TeamEvent], int] = await self.store.read(
            lambda tx: team_log.after(tx, team, after, creator=creator, limit=limit)
        )
        return found

    async def summary(self, team: str, *, by: str) -> team_log.Summary:
        """``team``'s backlog by aggregate, its counts of the items ``by`` may read."""
        self.team(team)
        creator = None if self.reads_all(by, team) else by
        found: team_log.Summary = await self.store.read(
            lambda tx: team_log.summary(tx, team, creator=creator)
        )
        return found
