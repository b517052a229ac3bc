"""One Agent's reconcile: read it (from the view), refuse what cannot run, issue its
certificate, apply its children, and write its staged status.

Called by ``handlers`` (on the Agent's and its Deployment's events, and a model's Served) and
by ``periodic`` (the resync). Idempotent: it renders what should be and applies it; what this
process applied or wrote it remembers (``Platform``), so an unchanged Agent costs no write.
"""

from __future__ import annotations

from pydantic import ValidationError

from ankka.api.resources import AgentSpec
from ankka.operator import (
    agent_status,
    agents,
    certificates,
    delegation,
    events,
    mcp_credentials,
    stores,
)
from ankka.operator.kube import LATER
from ankka.operator.objects import Obj, condition_status
from ankka.operator.reconcile import API_VERSION, Platform, _counted, _involved, record

__all__ = ["reconcile_agent"]


async def _served(p: Platform, namespace: str, names: set[str]) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for name in sorted(names):
        if p.view is not None:
            im = p.view.model(namespace, name)
        else:
            im = await p.kube.get(API_VERSION, "InstallationModel", namespace, name)
        out[name] = im is not None and condition_status(im.get("status"), "Served") == "True"
    return out


def _refusal(p: Platform, body: Obj, namespace: str, name: str) -> AgentSpec | tuple[str, str]:
    """The parsed spec, or (reason, words) why it cannot be rendered, naming the field."""
    try:
        spec = AgentSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        return "InvalidSpec", f"spec does not parse: {exc.errors()[0]['msg']}"
    owned = frozenset({agents.certificate_secret_name(name), stores.copied_secret_name(name)})
    reason = (
        agents.invalid_reason(spec)
        or agents.overlay_conflict(spec, p.settings, namespace=namespace, name=name)
        or mcp_credentials.invalid_credentials(spec, agent=name, owned=owned)
    )
    if reason is not None:
        return "InvalidSpec", reason
    store = stores.effective_store(spec, p.settings, agent=name)
    reason = stores.store_refusal(spec, store)
    if reason is not None:
        return "SqliteNeedsOneReplica", reason
    return spec


async def _shared_store(
    p: Platform, spec: AgentSpec, namespace: str, name: str, uid: str
) -> str | None:
    """Copy the chart's shared store Secret next to an Agent that uses it (a Secret reference
    cannot cross namespaces); words for the status when the Secret is missing, else None."""
    if spec.store is not None or not p.settings.default_store_secret:
        return None
    source = await p.shared_store_secret()
    if source is None:
        where = f"{p.settings.namespace}/{p.settings.default_store_secret}"
        return (
            f"the chart's shared store Secret {where} does not exist (values "
            "store.postgres.secretName); create it, or give the Agent spec.store"
        )
    await p.apply(stores.copied_secret(source, namespace=namespace, agent=name, uid=uid))
    return None


async def _credentials_secret(p: Platform, spec: AgentSpec, namespace: str) -> str | None:
    """Create the MCP credentials Secret the Agent names when it is absent (so its runtime
    needs no ``create``); words for the status when it exists and holds something else, else
    None. Checked once per resync."""
    secret = mcp_credentials.credentials_secret(spec)
    if secret is None or (namespace, secret) in p.credential_secrets:
        return None
    found = await p.kube.get("v1", "Secret", namespace, secret)
    if found is None:
        empty = mcp_credentials.empty_secret(namespace=namespace, name=secret)
        # None: someone else created it meanwhile; it is judged like any that was there.
        found = await p.kube.create(empty) or await p.kube.get("v1", "Secret", namespace, secret)
    words = mcp_credentials.foreign_secret(found) if found is not None else None
    if words is None:
        p.credential_secrets.add((namespace, secret))
    return words


async def _drop_credentials_rbac(p: Platform, spec: AgentSpec, namespace: str, name: str) -> None:
    """Delete the Role and RoleBinding of an Agent that keeps no credentials in a Secret."""
    if mcp_credentials.credentials_secret(spec) is None:
        role = mcp_credentials.role_name(name)
        await p.remove(mcp_credentials.RBAC, "RoleBinding", namespace, role)
        await p.remove(mcp_credentials.RBAC, "Role", namespace, role)


def _desired(body: Obj) -> int:
    replicas = (body.get("spec") or {}).get("replicas", 1)
    return replicas if isinstance(replicas, int) and replicas >= 0 else 0


async def _deployment(p: Platform, namespace: str, name: str) -> Obj | None:
    """The Agent's Deployment as its watch last saw it (its status is the pods' readiness:
    every change of it reconciles the Agent again, ``handlers.agent_deployment_changed``);
    fetched only without a view."""
    if p.view is None:
        return await p.kube.get("apps/v1", "Deployment", namespace, name)
    return p.view.deployment(namespace, name)


async def _write_agent_status(
    p: Platform, body: Obj, previous: Obj | None, status: Obj, *, started: float | None = None
) -> str:
    """Write the status unless it is what is stored already; post an Event when the phase
    changed (held, released, failed)."""
    meta = body["metadata"]
    key = (meta["namespace"], meta["name"])
    stored = previous or {}
    if any(stored.get(field) != value for field, value in status.items()):
        await p.kube.patch_status(API_VERSION, "Agent", *key, status, priority=LATER)
    # A merge patch leaves absent fields alone. By uid: an Agent made again is another object.
    p.statuses[key] = (meta["uid"], {**stored, **status})
    phase: str = status["phase"]
    words = "; ".join(
        str(c.get("message"))
        for kind in ("ModelsServed", "Ready")
        for c in status.get("conditions") or []
        if c.get("type") == kind and c.get("message")
    )
    happening = events.agent_happening((previous or {}).get("phase"), phase, words)
    if happening is not None:
        p.metrics.transitions.labels(happening.reason).inc()
        if happening.reason == "Held" and started is not None:
            p.metrics.hold_seconds.observe(p.clock.monotonic() - started)
        await record(p, _involved(body, "Agent"), happening)
    return phase


async def reconcile_agent(
    p: Platform, namespace: str, name: str, *, fetch: bool = False
) -> str | None:
    """Render one Agent; returns its phase, None if it is gone.

    The Agent and its InstallationModels come from the view, read under the Agent's lock:
    kopf updates its indexes before it runs the handler of the event that changed them, so a
    reconcile that takes the lock after another sees at least what that one saw. The status
    compared and transitioned from is the one this process last wrote, else the view's. A
    write is skipped when the rendered object is unchanged; a release is then the Deployment
    and the status. ``fetch`` (the resync) reads the Agent from the API instead, under the
    lock, so it is newer than any write made before."""
    with _counted(p, "agent"):
        return await _reconcile_agent(p, namespace, name, fetch=fetch, started=p.clock.monotonic())


async def _reconcile_agent(
    p: Platform, namespace: str, name: str, *, fetch: bool, started: float
) -> str | None:
    async with p.lock(namespace, name):
        if fetch or p.view is None:
            body = await p.kube.get(API_VERSION, "Agent", namespace, name)
        else:
            body = p.view.agent(namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            p.statuses.pop((namespace, name), None)
            return None
        now = p.clock.now()
        stored = body.get("status")
        uid = body["metadata"]["uid"]
        known = p.statuses.get((namespace, name))
        previous = known[1] if known is not None and known[0] == uid and not fetch else stored
        generation = body["metadata"].get("generation")
        refused = _refusal(p, body, namespace, name)
        if isinstance(refused, tuple):
            # Nothing is created for an invalid Agent; one that was valid before keeps its
            # children but runs no pods until it is fixed.
            await p.kube.scale_to_zero(namespace, name)
            p.applied.pop(("apps/v1", "Deployment", namespace, name), None)
            failed = agent_status.failed_status(
                previous,
                code=refused[0],
                reason=refused[1],
                desired=_desired(body),
                generation=generation,
                now=now,
            )
            return await _write_agent_status(p, body, previous, failed, started=started)
        spec = refused
        shared = await _shared_store(p, spec, namespace, name, uid)
        foreign = None if shared is not None else await _credentials_secret(p, spec, namespace)
        if shared is not None or foreign is not None:
            failed = agent_status.failed_status(
                previous,
                code="StoreSecretMissing" if shared is not None else "McpCredentialsSecretTaken",
                reason=shared or foreign or "",
                desired=spec.replicas,
                generation=generation,
                now=now,
            )
            return await _write_agent_status(p, body, previous, failed, started=started)
        installations = {m.installation for m in spec.models if m.installation}
        awaited = agents.awaited_models(spec, await _served(p, namespace, installations))
        certificate = await certificates.ensure_agent_certificate(
            p, namespace=namespace, name=name, uid=uid, status=previous, check_exists=fetch
        )
        children = agents.agent_children(
            namespace=namespace,
            name=name,
            uid=uid,
            spec=spec,
            settings=p.settings,
            held=bool(awaited),
            delegators=delegation.delegators_of(
                p.view.agents() if p.view is not None else (), namespace=namespace, name=name
            ),
        )
        for child in children:
            await p.apply(child)
        await _drop_credentials_rbac(p, spec, namespace, name)
        status = agent_status.rendered_status(
            previous,
            awaited=awaited,
            replicas=spec.replicas,
            deployment=await _deployment(p, namespace, name),
            certificate=certificate,
            generation=generation,
            now=now,
            a2a_card_url=agents.a2a_card_url(namespace, name),
        )
        return await _write_agent_status(p, body, previous, status, started=started)
