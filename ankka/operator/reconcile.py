"""What one reconcile does, over the :class:`~ankka.operator.kube.Kube` seam and the pure builders.

``handlers`` (the kopf glue) calls these; each is idempotent: it reads what is there, renders
what should be, and server-side-applies it, so running it twice, concurrently with a timer, or
after a restart converges on the same objects. Reconciles of one Agent are serialised by a lock
so a stale read cannot re-hold an Agent another reconcile just released.

What is there is read from the :class:`View` (kopf's watches, through indexes kopf updates
before it runs a handler), not fetched again; a view only moves forward and is read under the
Agent's lock, and what this process wrote since (a status, a certificate) it remembers itself.
Without a view (before the startup handler, or in a script) the same reconciles GET instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol, TypeAlias

import httpx2
from pydantic import ValidationError

from ankka._kernel.clock import Clock, SystemClock
from ankka._kernel.errors import ConfigurationError
from ankka.api.capabilities import ModelCapabilities, ProbeError, probe
from ankka.api.resources import GROUP, VERSION, ConditionStatus, InstallationModelSpec
from ankka.operator import agents, certs, events, models, netpol, server_pods, tlssecrets
from ankka.operator.agent_status import Issued
from ankka.operator.identity import OperatorIdentity
from ankka.operator.kube import SOONEST, Kube, KubeError
from ankka.operator.metrics import OperatorMetrics
from ankka.operator.objects import Obj, condition_status, labels_for
from ankka.operator.settings import Settings

__all__ = [
    "Platform",
    "View",
    "ensure_ca",
    "probe_is_due",
    "probe_model",
    "reconcile_model",
    "render_models_file",
    "render_token_review_binding",
]

API_VERSION = f"{GROUP}/{VERSION}"
log = logging.getLogger("ankka.operator")


class View(Protocol):
    """The objects as kopf's watches last saw them (``handlers.KopfView``): never older than
    the event whose handler reads them, possibly older than a write this process just made."""

    def agent(self, namespace: str, name: str) -> Obj | None: ...

    def model(self, namespace: str, name: str) -> Obj | None: ...

    def models(self) -> list[Obj]: ...

    def agents(self) -> list[Obj]: ...

    def deployment(self, namespace: str, name: str) -> Obj | None: ...


class Platform:
    """What every reconcile shares: the API seam, settings, the clock and the CA."""

    def __init__(self, kube: Kube, settings: Settings, *, clock: Clock | None = None) -> None:
        self.kube = kube
        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        self.ca: certs.KeyPair | None = None
        self._identity: OperatorIdentity | None = None
        self.view: View | None = None  # set by the startup handler
        self.metrics = OperatorMetrics()
        # Only the locks in use (held or awaited): an idle one carries nothing, so it is
        # dropped, and a deleted Agent leaves none behind.
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}
        # What this process applied and the certificates it knows to be good until their
        # renewal time: they only save requests, and the periodic resync forgets them, so a
        # child changed or deleted behind the operator's back is restored within that period.
        # Each Agent's status as last written (or confirmed) by this process, the one writer:
        # newer than the view until the watch catches up; the resync reads it fresh instead.
        # Each body as applied (rendered afresh every reconcile, never changed after).
        self.applied: dict[tuple[str, str, str, str], Obj] = {}
        # What this process deleted (or found gone) since it started: an Agent that needs no
        # such child costs one DELETE per child per operator start, not one per reconcile.
        self.removed: set[tuple[str, str, str, str]] = set()
        # MCP credentials Secrets (namespace, name) seen fit (mcp_credentials), until the resync.
        self.credential_secrets: set[tuple[str, str]] = set()
        self.good_certificates: dict[tuple[str, str], tuple[str, dt.datetime, str]] = {}
        # Each Agent's certificate as this process recorded or confirmed it (certificates.py).
        self.agent_certificates: dict[tuple[str, str], Issued] = {}
        self.statuses: dict[tuple[str, str], tuple[str, Obj]] = {}  # (ns, name) → (uid, status)
        self._models_file = _Coalesced()
        self._shared_store: tuple[Obj | None] | None = None
        self._token_review_binding = _Coalesced()
        # One client for every probe: a client's TLS context costs ~15-30 ms of CPU to build,
        # which at one per probe (every unserved model, every tick) was most of the operator's
        # CPU and spread the models' Served over seconds.
        self._probes: httpx2.AsyncClient | None = None

    def probe_client(self) -> httpx2.AsyncClient:
        if self._probes is None:
            # A fresh connection per probe as before (none kept alive): a model server that
            # restarted must not fail a probe on a stale connection.
            self._probes = httpx2.AsyncClient(
                timeout=self.settings.probe_timeout_seconds,
                # No cap of its own (httpx2 queues past 100, and a queued probe would time out as
                # failed): probes are bounded by the models, all probed at once after a restart.
                limits=httpx2.Limits(max_keepalive_connections=0, max_connections=None),
            )
        return self._probes

    async def close(self) -> None:
        """Close the probes' client and the API client."""
        if self._probes is not None:
            await self._probes.aclose()
            self._probes = None
        self.kube.close()

    def forget(self) -> None:
        self.applied.clear()
        self.good_certificates.clear()
        self.agent_certificates.clear()
        self.credential_secrets.clear()
        self._shared_store = None

    async def shared_store_secret(self) -> Obj | None:
        """The chart's shared store Secret (platform namespace), read once per resync."""
        if self._shared_store is None:
            name = self.settings.default_store_secret
            self._shared_store = (
                await self.kube.get("v1", "Secret", self.settings.namespace, name),
            )
        return self._shared_store[0]

    async def apply(self, obj: Obj) -> None:
        """Server-side apply, skipped when this process applied the identical body already;
        a Deployment that differs from the one it applied only by being held or released is
        merge-patched instead (its replicas and held annotation): a cheaper write for the API
        server than the whole object's apply (bench/kube_write_rate.py --kinds). The next
        apply is forced, so it takes those two fields back from the patch's owner."""
        meta = obj["metadata"]
        key = (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])
        last = self.applied.get(key)
        if last == obj:
            return
        change = agents.release_patch(last, obj) if last is not None else None
        if change is None or not await self.kube.patch(*key, change):
            await self.kube.apply(obj)  # no patch, or the object is gone: apply it whole
        self.applied[key] = obj
        self.removed.discard(key)

    async def remove(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        """Delete a child the Agent no longer needs, skipped when this process did already."""
        key = (api_version, kind, namespace, name)
        if key in self.removed:
            return
        self.applied.pop(key, None)
        await self.kube.delete(*key)
        self.removed.add(key)

    @contextlib.asynccontextmanager
    async def lock(self, namespace: str, name: str) -> AsyncIterator[None]:
        """Hold the Agent's lock: its reconciles run one at a time."""
        key = (namespace, name)
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def locks_in_use(self) -> int:
        return len(self._locks)

    def require_ca(self) -> certs.KeyPair:
        if self.ca is None:
            raise RuntimeError("the platform CA is not loaded; ensure_ca() runs at startup")
        return self.ca

    def identity(self) -> OperatorIdentity:
        """The operator's own client identity (``ankka://platform/operator``), from the CA."""
        if self._identity is None:
            self._identity = OperatorIdentity(
                self.require_ca(), lifetime=self.settings.certificate_lifetime, clock=self.clock
            )
        return self._identity


class _Coalesced:
    """Single flight for one idempotent job: a caller returns once a run that started after
    its call has finished, so calls arriving during a run share the next one."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._asked = 0
        self._done = 0

    async def run(self, job: Callable[[], Awaitable[None]]) -> None:
        self._asked += 1
        mine = self._asked
        async with self._lock:
            if self._done >= mine:
                return
            upto = self._asked
            await job()
            self._done = upto


async def record(
    p: Platform,
    involved: dict[str, Any],
    happening: events.Happening,
    *,
    priority: int | None = None,
) -> None:
    """Post an Event about ``involved``; a refused Event is logged, never fails a reconcile."""
    try:
        await p.kube.create(events.event(involved, happening, now=p.clock.now()), priority=priority)
    except KubeError as exc:
        log.warning("could not post Event %s on %s: %s", happening.reason, involved["name"], exc)


def _involved(body: Obj, kind: str) -> dict[str, Any]:
    meta = body["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "name": meta["name"],
        "namespace": meta["namespace"],
        "uid": meta.get("uid"),
    }


# --- certificates ---------------------------------------------------------------------------


async def ensure_ca(p: Platform) -> certs.KeyPair:
    """Load the CA Secret, creating it once; a concurrent creator's CA wins and is loaded."""
    ns, name = p.settings.namespace, p.settings.ca_secret
    for _ in range(3):
        secret = await p.kube.get("v1", "Secret", ns, name)
        pair = tlssecrets.pair_of(secret)
        if pair is not None and certs.matches(pair):
            p.ca = pair
            return pair
        if secret is None:
            fresh = certs.new_ca(now=p.clock.now())
            await p.kube.create(tlssecrets.ca_secret(ns, name, fresh))
            continue
        raise ConfigurationError(
            f"Secret {ns}/{name} holds no usable CA (tls.crt/tls.key missing or mismatched); "
            "delete it to have the operator create a new CA"
        )
    raise ConfigurationError(
        f"could not create or read the CA Secret {ns}/{name}: another writer keeps replacing it"
    )


# --- installation models --------------------------------------------------------------------


def _model_spec(body: Obj) -> InstallationModelSpec:
    return InstallationModelSpec.model_validate(body.get("spec") or {})


AgentsByModel: TypeAlias = Mapping[tuple[str, str], Iterable[str]]


async def render_models_file(p: Platform, agents_by_model: AgentsByModel | None = None) -> None:
    """Render every InstallationModel into the gateway's models-file ConfigMap.

    With ``agents_by_model`` ((namespace, model) → the Agents that name it; kopf's live index)
    each model lists its ``callers``, so the gateway serves it to those Agents only. Renders
    asked for while one runs share the next one, which reads the view then (a burst of new
    Agents is a few renders, not one each); an unchanged file is not applied again."""

    async def render() -> None:
        items = p.view.models() if p.view is not None else None
        if items is None:
            items = await p.kube.list(API_VERSION, "InstallationModel")
        served = []
        for item in items:
            meta = item["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            try:
                spec = _model_spec(item)
            except ValidationError:
                continue
            namespace, name = meta["namespace"], meta["name"]
            callers = (
                None
                if agents_by_model is None
                else models.callers_of(namespace, name, agents_by_model)
            )
            served.append(models.probe_target(namespace, name, spec, callers=callers))
        await p.apply(models.models_configmap(p.settings, served))

    await p._models_file.run(render)


async def render_token_review_binding(
    p: Platform, accounts: Callable[[], Iterable[tuple[str, str]]]
) -> None:
    """Name every Agent's ServiceAccount, (namespace, name) from ``accounts()`` (kopf's live
    index, read when the render runs), in the chart's TokenReview ClusterRoleBinding; nothing
    when TokenReview is switched off. Single-flight like the models file: renders asked for
    during one share the next (1,000 new Agents were ~650 applies of a growing list). A
    refusal is logged, not raised: runtimes then answer 503 to token callers, and the Agents
    are still rendered."""
    if not p.settings.token_review_url:
        return

    async def render() -> None:
        try:
            await p.apply(netpol.token_review_binding(accounts(), p.settings))
        except KubeError as exc:
            log.warning(
                "cannot name the Agents' ServiceAccounts in ClusterRoleBinding %s (installed "
                "by the chart with tokenReview.enabled): %s",
                p.settings.token_review_binding,
                exc,
            )

    await p._token_review_binding.run(render)


async def reconcile_model(
    p: Platform, body: Obj, agents_by_model: AgentsByModel | None = None
) -> None:
    """Apply a deployed model's Deployment and Service, re-render the models file, probe."""
    with _counted(p, "model"):
        meta = body["metadata"]
        spec = _model_spec(body)
        name, uid = meta["name"], meta["uid"]
        for child in models.server_children(meta["namespace"], name, uid, spec, p.settings):
            await p.apply(child)
        await render_models_file(p, agents_by_model)
        await probe_model(p, body)


@contextlib.contextmanager
def _counted(p: Platform, kind: str) -> Iterator[None]:
    """Count one reconcile of ``kind`` and time it; a raised exception counts as ``error``."""
    started = p.clock.monotonic()
    outcome = "error"
    try:
        yield
        outcome = "ok"
    finally:
        p.metrics.reconciles.labels(kind, outcome).inc()
        p.metrics.reconcile_seconds.labels(kind).observe(p.clock.monotonic() - started)


def probe_is_due(body: Obj, *, now: dt.datetime) -> bool:
    """Unserved models are probed every tick; served ones every probeIntervalSeconds."""
    status = body.get("status") or {}
    if condition_status(status, "Served") != ConditionStatus.TRUE.value:
        return True
    last = status.get("lastProbeTime")
    if not isinstance(last, str):
        return True
    interval = _model_spec(body).probe_interval_seconds
    when = dt.datetime.fromisoformat(last.replace("Z", "+00:00"))
    return now >= when + dt.timedelta(seconds=interval)


async def _server_trouble(
    p: Platform, meta: Obj, spec: InstallationModelSpec
) -> server_pods.Trouble | None:
    """Why a deployed server does not answer, if its pods' container keeps dying (read only
    after a failed probe; an adopted endpoint has no pods of ours). A refused read (a chart
    without the pods rule) is logged and leaves the condition as it was."""
    if spec.server is None:
        return None
    selector = server_pods.pod_selector(labels_for("model-server", meta["name"]))
    try:
        pods = await p.kube.list("v1", "Pod", meta["namespace"], labels=selector, priority=SOONEST)
    except KubeError as exc:
        log.warning(
            "cannot read the pods of model %s/%s to say why it is not served: %s",
            meta["namespace"],
            meta["name"],
            exc,
        )
        return None
    return server_pods.server_trouble(pods)


async def probe_model(p: Platform, body: Obj) -> bool:
    """Probe one model and record the result in its status; returns whether it is Served."""
    meta = body["metadata"]
    spec = _model_spec(body)
    target = models.probe_target(meta["namespace"], meta["name"], spec)
    probed: ModelCapabilities | None = None
    error: str | None = None
    started = p.clock.monotonic()
    try:
        probed = await probe(
            p.probe_client(),
            kind=target.kind,
            url=target.url,
            model=spec.model,
            declared=spec.capabilities,
        )
    except ProbeError as exc:
        error = f"{exc} (at {target.url})"
    p.metrics.probe_seconds.observe(p.clock.monotonic() - started)
    p.metrics.probes.labels("served" if probed is not None else "failed").inc()
    trouble = None if probed is not None else await _server_trouble(p, meta, spec)
    now = p.clock.now()
    status = models.served_status(
        body.get("status") or {},
        spec=spec,
        target=target,
        probed=probed,
        error=error,
        generation=meta.get("generation"),
        now=now,
        trouble=trouble,
    )
    previous = body.get("status") or {}
    if not models.status_worth_writing(previous, status, spec=spec, now=now):
        return probed is not None
    await p.kube.patch_status(
        API_VERSION, "InstallationModel", meta["namespace"], meta["name"], status, priority=SOONEST
    )
    was = condition_status(previous, "Served")
    served_message = (
        f"probed at {target.url}: capabilities {', '.join(status['capabilities']) or 'none'}"
        if probed is not None
        else error or ""
    )
    happening = events.model_happening(
        None if was is None else was == "True", probed is not None, served_message
    )
    if happening is not None:
        # As soon as the status: the probe loop's next model waits for this one's Event,
        # which must not queue behind the releases this model's Served just started.
        await record(p, _involved(body, "InstallationModel"), happening, priority=SOONEST)
    return probed is not None
