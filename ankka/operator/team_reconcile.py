"""Following Teams: read each one's backlog from its Agent's runtime, mirror the counts.

``periodic`` runs :func:`refresh` for every Team each ``team_refresh_seconds`` (one list of
Teams, then one ``GET /v1/teams/{team}/summary`` per Team, at most 16 at a time, one client
per Agent a round: counts and budget by aggregate in the runtime's store, whatever the
backlog's size); a Team's status is written only when it changed, so an idle backlog costs no
write. A runtime older than the summary route answers it 404: the Team is then read from the
items listing, as before, and the operator says so once per runtime address in its log. No
kopf handler watches Teams: nothing needs doing when one is created or deleted (the backlog is
the runtime's, and stays there), so a Team carries no finalizer and its first status comes at
the next round.

The runtime is reached as a Task's is (:mod:`ankka.operator.task_reconcile`): at its Service
or ``spec.runtime.address``, over mTLS as ``ankka://platform/operator`` (which reads every
item of a backlog: the platform may), accepted only when its certificate names the Agent.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

import httpx2
from pydantic import ValidationError

from ankka.api.resources import ConditionStatus, TeamPhase, TeamSpec
from ankka.operator import certs, teams
from ankka.operator.objects import Obj, condition, set_condition
from ankka.operator.reconcile import API_VERSION, Platform
from ankka.operator.runtime_client import RuntimeClients, unreachable
from ankka.operator.task_reconcile import agent_runtime

__all__ = ["read_backlog", "refresh"]

log = logging.getLogger("ankka.operator")
# Runtime addresses told of (once each) as answering no summary route: read from the listing.
_LISTING_ONLY: set[str] = set()


async def read_backlog(
    client: httpx2.AsyncClient, address: str, team: str, agent: str
) -> teams.Reading:
    """The team's summary from the runtime at ``address``; from a runtime without the route
    (404, and its listing of the team answered), its listing."""
    base = f"{address}/v1/teams/{quote(team, safe='')}"
    answer = await client.get(f"{base}/summary")
    summary = True
    if answer.status_code == 404:
        listing = await client.get(f"{base}/items")
        if listing.status_code != 404:
            summary = False
            if address not in _LISTING_ONLY:
                _LISTING_ONLY.add(address)
                log.warning(
                    "the runtime at %s has no team summary route (older than this operator): "
                    "its Teams are read from the whole items listing, with no budget shown; "
                    "upgrade it to read them by aggregate",
                    address,
                )
        answer = listing
    try:
        body: Any = answer.json()
    except ValueError:
        body = None
    return teams.reading_of(
        answer.status_code, body, team=team, agent=agent, address=address, summary=summary
    )


async def _read(
    p: Platform, namespace: str, spec: TeamSpec, team: str, clients: RuntimeClients
) -> teams.Reading:
    address, why, message = await agent_runtime(p, namespace, spec.agent)
    if address is None:
        return teams.waiting(why, message)
    try:
        client = await clients.get(address, certs.agent_uri(namespace, spec.agent))
        return await read_backlog(client, address, team, spec.agent)
    except httpx2.HTTPError as exc:
        why, message = unreachable(exc, address=address, namespace=namespace, agent=spec.agent)
        return teams.Reading(TeamPhase.WAITING, why, message)


async def refresh(p: Platform, body: Obj, clients: RuntimeClients) -> None:
    """One round for one Team: read its backlog's counts, write its status if it changed."""
    meta = body["metadata"]
    namespace, name = str(meta["namespace"]), str(meta["name"])
    try:
        spec = TeamSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        reading = teams.Reading(TeamPhase.FAILED, "InvalidSpec", str(exc))
        team = name
    else:
        team = teams.team_name(name, spec)
        reading = await _read(p, namespace, spec, team, clients)
    old: Obj = body.get("status") or {}
    fields = teams.status_fields(reading, team=team, old=old)
    served = condition(
        teams.SERVED,
        ConditionStatus.TRUE if reading.phase is TeamPhase.ACTIVE else ConditionStatus.FALSE,
        reading.reason,
        reading.message,
        now=p.clock.now(),
    )
    conditions = set_condition(list(old.get("conditions") or []), served)
    status = {**fields, "conditions": conditions, "observedGeneration": meta.get("generation")}
    if _same(old, status):
        return
    await p.kube.patch_status(API_VERSION, "Team", namespace, name, status)
    if old.get("phase") != status["phase"]:
        log.info("Team %s/%s: %s (%s)", namespace, name, status["phase"], reading.reason)


def _same(old: Obj, new: dict[str, Any]) -> bool:
    """Whether writing ``new`` would change nothing (a condition's time aside)."""

    def shown(status: Obj) -> list[tuple[Any, ...]]:
        return [
            (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
            for c in status.get("conditions") or []
        ]

    return all(old.get(k) == v for k, v in new.items() if k != "conditions") and shown(
        old
    ) == shown(new)
