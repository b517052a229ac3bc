"""The operator's one periodic loop: re-probe models, renew certificates, resync Agents,
read Teams' backlogs.

Why not kopf timers: a kopf timer puts a finalizer on every object it watches, so Agents,
InstallationModels and every certificate Secret could not be deleted while the operator is
down (and a Team needs none: deleting one leaves nothing to undo). One loop, started by the
startup handler and cancelled (and awaited) by the cleanup handler, lists what is due each
tick instead: one list request per kind per tick.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ankka.operator import agent_reconcile, certificates, reconcile, team_reconcile
from ankka.operator.kube import SOONEST, KubeError
from ankka.operator.objects import Obj
from ankka.operator.runtime_client import RuntimeClients

__all__ = ["run"]

log = logging.getLogger("ankka.operator")
_CONCURRENCY = 16
# Probes wait mostly on model servers and the models' status writes (first in the seam): 16 at
# a time turned 50 models Served in four rounds ~0.6 s apart (bench/operator_scale.py).
_PROBES = 64


async def _bounded(jobs: list[Awaitable[object]], limit: int = _CONCURRENCY) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(job: Awaitable[object]) -> None:
        async with gate:
            try:
                await job
            except Exception:
                log.exception("periodic work failed; it is retried next tick")

    await asyncio.gather(*(one(j) for j in jobs))


async def probe_due_models(p: reconcile.Platform) -> None:
    items = await p.kube.list(reconcile.API_VERSION, "InstallationModel", priority=SOONEST)
    now = p.clock.now()
    due = [
        m
        for m in items
        if not m["metadata"].get("deletionTimestamp") and reconcile.probe_is_due(m, now=now)
    ]
    await _bounded([reconcile.probe_model(p, m) for m in due], _PROBES)


async def renew_due_certificates(p: reconcile.Platform) -> None:
    """The gateway's certificate, then every Agent whose recorded certificate is due (read
    from the Agents, not their Secrets: the operator lists no Secret)."""
    await certificates.ensure_gateway_certificate(p)
    seen = p.view.agents() if p.view is not None else None
    if seen is None:
        seen = await p.kube.list(reconcile.API_VERSION, "Agent")
    due = certificates.due_agents(seen, now=p.clock.now())
    await _bounded([agent_reconcile.reconcile_agent(p, ns, name) for ns, name in due])


async def resync_agents(p: reconcile.Platform) -> None:
    p.forget()  # re-apply everything once per resync, whatever this process remembers
    agents = await p.kube.list(reconcile.API_VERSION, "Agent")
    await _bounded(
        [
            agent_reconcile.reconcile_agent(
                p, a["metadata"]["namespace"], a["metadata"]["name"], fetch=True
            )
            for a in agents
        ]
    )


async def refresh_teams(p: reconcile.Platform) -> None:
    """Every Team's status from its runtime's backlog; one client per Agent for the round."""
    try:
        found = await p.kube.list(reconcile.API_VERSION, "Team")
    except KubeError as exc:
        if exc.http_status != 404:
            raise
        # No Team CRD (Helm installs CRDs but never upgrades them): nothing to read.
        log.debug("no Team resource on the API server (%s): apply crds/teams.ankka.dev.yaml", exc)
        return
    by_agent: dict[tuple[str, str], list[Obj]] = {}
    for body in found:
        if not body["metadata"].get("deletionTimestamp"):
            agent = str((body.get("spec") or {}).get("agent"))
            by_agent.setdefault((body["metadata"]["namespace"], agent), []).append(body)

    async def one_agent(bodies: list[Obj]) -> None:
        async with RuntimeClients(p.identity(), timeout=10.0) as clients:
            await _bounded([team_reconcile.refresh(p, b, clients) for b in bodies])

    await _bounded([one_agent(bodies) for bodies in by_agent.values()])


async def run(p: reconcile.Platform) -> None:
    """Run until cancelled; a failing step is logged and retried on the next tick."""
    s = p.settings
    next_certs = next_resync = next_teams = p.clock.monotonic()
    next_resync += s.agent_resync_seconds
    reported = -1
    while True:
        started = p.clock.monotonic()
        steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("probing models", lambda: probe_due_models(p))
        ]
        if started >= next_certs:
            steps.append(("renewing certificates", lambda: renew_due_certificates(p)))
            next_certs = started + s.certificate_check_seconds
        if started >= next_teams:
            steps.append(("reading teams", lambda: refresh_teams(p)))
            next_teams = started + s.team_refresh_seconds
        if started >= next_resync:
            steps.append(("resyncing agents", lambda: resync_agents(p)))
            next_resync = started + s.agent_resync_seconds
        for what, step in steps:
            try:
                await step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed; retrying next tick", what)
        if p.kube.requests != reported:
            reported = p.kube.requests
            log.debug("api requests so far: %d", reported)
        await asyncio.sleep(max(0.0, s.probe_tick_seconds - (p.clock.monotonic() - started)))
