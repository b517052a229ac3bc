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
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from ankka._kernel.errors import NotFound, RequestError, StoreError
from ankka.runtime.declare.teams import Team
from ankka.runtime.drivers.tasks.host import TaskHost
from ankka.runtime.drivers.tasks.iteration import told
from ankka.runtime.drivers.teams.lead import lead_news, lead_tools
from ankka.runtime.records.tasks import MEMBER_INSTANCE_PREFIX, Conflict, check_id
from ankka.runtime.store import team_statements as backlog
from ankka.runtime.store.tasks import create_tables
from ankka.runtime.store.team_statements import Claimed, Grant, Item, ItemBody

__all__ = ["MEMBER_PREFIX", "TeamHost"]

log = logging.getLogger("ankka.runtime.teams")

MEMBER_PREFIX = MEMBER_INSTANCE_PREFIX


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
        tasks.reserved = self._foreign
        if self.teams:  # the leads' tasks get the backlog tools (drivers/teams/lead.py)
            tasks.bench = replace(
                tasks.bench,
                lead_tools=partial(lead_tools, self),
                lead_news=partial(lead_news, self),
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
            await create_tables(self.store, backlog.SCHEMA)
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

    async def _renew(self, until: float) -> None:
        await self.store.write(lambda tx: backlog.renew(tx, self.owner, until))

    async def _tick(self, team: Team) -> None:
        stamp = self.clock.now()
        now = stamp.timestamp()
        await self.store.write(lambda tx: backlog.settle(tx, team.name, stamp))
        back = await self.store.write(lambda tx: backlog.expire(tx, team.name, now, stamp))
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
            done = await self.store.write(claim)
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

    # -- what the HTTP API asks -------------------------------------------------------------

    def team(self, name: str) -> Team:
        found = self.teams.get(name)
        if found is None:
            known = ", ".join(sorted(self.teams)) or "none"
            raise NotFound(f"there is no team {name!r} (teams: {known})")
        return found

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
    ) -> tuple[Item, bool]:
        """Add ``item`` (``planned_by``: the lead's task that added it, which hears its end)."""
        declared = self.team(team)
        check_id(item, "item")
        self._check_body(declared, body)
        now = self.clock.now()
        done = await self.store.write(
            lambda tx: backlog.put(
                tx, team, item, body, created_by=created_by, now=now, planned_by=planned_by
            )
        )
        self._wake.set()
        return done

    async def get(self, team: str, item: str) -> Item:
        self.team(team)
        found = await self.store.read(lambda tx: backlog.get(tx, team, item))
        if found is None:
            raise NotFound(f"team {team!r} has no item {item!r}")
        return found

    async def items(self, team: str) -> Sequence[Item]:
        self.team(team)
        found: list[Item] = await self.store.read(lambda tx: backlog.items(tx, team))
        return found

    async def wait(self, team: str, item: str, seconds: float) -> Item:
        """The item once it is final, or as it stands after ``seconds``."""
        deadline = self.clock.monotonic() + seconds
        while True:
            found = await self.get(team, item)
            left = deadline - self.clock.monotonic()
            if found.final or left <= 0:
                return found
            await asyncio.sleep(min(left, 0.25))

    async def cancel(self, team: str, item: str) -> Item:
        """Cancel ``item`` (the lead re-planning): see :func:`backlog.cancel`."""
        self.team(team)
        now = self.clock.now()
        found, ended = await self.store.write(lambda tx: backlog.cancel(tx, team, item, now))
        told(self.tasks.bench, ended)
        self.tasks.poke()
        return found

    async def reprioritise(self, team: str, item: str, priority: int) -> Item:
        """Give ``item`` a new priority (the lead re-planning): see
        :func:`backlog.reprioritise`."""
        self.team(team)
        now = self.clock.now()
        found: Item = await self.store.write(
            lambda tx: backlog.reprioritise(tx, team, item, priority, now)
        )
        return found

    async def claims(self, team: str) -> list[tuple[str, int, str, str, str, str]]:
        self.team(team)
        found: list[tuple[str, int, str, str, str, str]] = await self.store.read(
            lambda tx: backlog.claims(tx, team)
        )
        return found
