"""The team host's one check of who may act on a backlog item (:meth:`TeamHost.permitted`),
which the routes and the lead's tools share: an item is its creator's, the platform's and of
whoever the lead's access names; a caller without the right changes nothing. On a real SQLite
store, with the scripted provider (no item is claimed: the team host's loop is not started).
"""

from __future__ import annotations

import pytest

from ankka._kernel.errors import RequestError
from ankka.runtime.agents import Service
from ankka.runtime.declare.policy import Access, NotPermitted, SessionPolicy
from ankka.runtime.drivers.teams.backlog import TeamHost
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.store import team_statements as backlog
from ankka.runtime.store.tasks import create_tables
from ankka.runtime.store.team_statements import ItemBody
from ankka.runtime.tasks import AutonomousAgent
from ankka.runtime.teams import Team
from examples import tasks
from tests.unit.runtime.conftest import MakeHost

PLATFORM = "ankka://platform/admin"
BODY = ItemBody("summary", "Summarise sqlite.")


def _service() -> Service:
    service = Service("desk")
    researcher = service.autonomous(tasks.researcher)
    planner = service.autonomous(
        AutonomousAgent(name="planner", accepts=tasks.researcher.accepts, model="default")
    )
    service.team(Team(name="desk", lead=planner, members=[researcher]))
    return service


async def _teams(make_host: MakeHost) -> TeamHost:
    policy = SessionPolicy(agents={"planner": Access(write=["carol"])})
    host = await make_host(_service(), ScriptedProvider([], name="default"), policy=policy)
    teams = TeamHost(host)
    await create_tables(teams.store, backlog.SCHEMA)
    await teams.put("desk", "a1", BODY, created_by="alice")
    return teams


async def test_a_caller_the_policy_keeps_out_may_not_change_or_read_an_item(
    make_host: MakeHost,
) -> None:
    teams = await _teams(make_host)
    with pytest.raises(NotPermitted, match="caller 'bob' may not change item 'a1' of team"):
        await teams.cancel("desk", "a1", by="bob")
    with pytest.raises(NotPermitted, match="this task's creator 'bob' may not change item"):
        await teams.reprioritise("desk", "a1", 5, by="bob", role="this task's creator")
    with pytest.raises(NotPermitted, match="caller 'bob' may not read item 'a1'"):
        await teams.get("desk", "a1", by="bob")
    assert await teams.items("desk", by="bob") == []
    with pytest.raises(NotPermitted, match="may not change item 'a1'"):
        await teams.put("desk", "a1", BODY, created_by="bob")  # the same body, sent again
    item = await teams.get("desk", "a1", by="alice")
    assert (item.state, item.priority) == ("ready", 0)


async def test_the_creator_the_leads_access_and_the_platform_may_change_an_item(
    make_host: MakeHost,
) -> None:
    teams = await _teams(make_host)
    assert (await teams.reprioritise("desk", "a1", 3, by="alice")).priority == 3
    assert (await teams.reprioritise("desk", "a1", 7, by="carol")).priority == 7
    assert [i.id for i in await teams.items("desk", by="carol")] == ["a1"]
    assert (await teams.cancel("desk", "a1", by=PLATFORM)).state == "cancelled"


async def test_an_item_depending_on_one_its_creator_may_not_read_is_refused_as_missing(
    make_host: MakeHost,
) -> None:
    teams = await _teams(make_host)

    async def refused(item: str, dependency: str) -> str:
        body = ItemBody("summary", "More.", (dependency,))
        with pytest.raises(RequestError) as raised:
            await teams.put("desk", item, body, created_by="bob")
        assert not isinstance(raised.value, NotPermitted)  # as a missing one: 422, not 403
        return str(raised.value)

    theirs, nothing = await refused("b1", "a1"), await refused("b2", "zz")
    assert theirs.replace("'a1'", "'zz'").replace("'b1'", "'b2'") == nothing
    assert [i.id for i in await teams.items("desk", by=PLATFORM)] == ["a1"]
    mine, created = await teams.put(
        "desk", "c1", ItemBody("summary", "-", ("a1",)), created_by="carol"
    )
    assert created and mine.state == "waiting"
