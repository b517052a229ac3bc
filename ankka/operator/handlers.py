"""The kopf handlers: thin glue from Kubernetes events to ``ankka.operator.reconcile``.

Run with ``ankka operator`` (``ankka.operator.cli``) or ``kopf run -m ankka.operator.handlers``;
never by file path, which would put this package's folder on ``sys.path``.

What triggers what:

- InstallationModel created, changed (spec) or seen at start → its children, the models file,
  a probe. ``periodic`` re-probes: every tick while not Served, every ``probeIntervalSeconds``
  after (a loop, not kopf timers, which would put finalizers on every object).
- InstallationModel's ``Served`` changes (any watch event, compared with the last one seen) →
  every Agent that names it, found through the ``agents_by_model`` index, is reconciled, so a
  held Agent is released by the operator alone within a watch round-trip.
- Two more indexes, ``agent_bodies`` and ``model_bodies``, hold each Agent and
  InstallationModel as last watched: the reconciles read them (``KopfView``) instead of
  fetching the objects again.
- Agent created, changed (spec) or seen at start → rendered (or failed, or held); ``periodic``
  re-reconciles every Agent slowly as a backstop and renews each certificate Secret (label
  ``ankka.dev/certificate``) at two thirds of its life.
- Task created or seen at start → a daemon hands it to its Agent's runtime and follows it until
  it is final (``task_reconcile``); deleted → cancelled at the runtime. Tasks, unlike the other
  resources, carry a finalizer (``ankka.dev/task-cancellation``): the daemon and the
  cancellation need it. A Task marked with kopf's default one by an older operator is freed.

No module state: the startup handler reads the settings (``ANKKA_*``, so importing this module
reads nothing), builds the :class:`~ankka.operator.reconcile.Platform` and starts the periodic
loop, and keeps both in kopf's operator-level memo. kopf gives every resource handler a shallow
copy of that memo, so each sees the one platform; ``served`` in a model's own memo is per object.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from typing import Any

import kopf

from ankka._kernel.errors import ConfigurationError
from ankka._kernel.exposition import CONTENT_TYPE
from ankka._kernel.health import HealthPort
from ankka._kernel.logs import say
from ankka.api.resources import GROUP, VERSION
from ankka.operator import (
    agent_reconcile,
    certificates,
    delegation,
    periodic,
    reconcile,
    task_reconcile,
)
from ankka.operator.kube import Kube, KubeError
from ankka.operator.objects import condition_status
from ankka.operator.runtime_client import RuntimeClients
from ankka.operator.settings import Settings

log = logging.getLogger("ankka.operator")

_PLATFORM = "ankka_platform"
_PERIODIC = "ankka_periodic"  # owned: created by startup, cancelled and awaited by cleanup
_METRICS = "ankka_metrics"  # the metrics port: opened by startup, closed by cleanup


def platform(memo: kopf.Memo) -> reconcile.Platform:
    """The platform the startup handler put in the operator's memo."""
    p = memo.get(_PLATFORM)
    if not isinstance(p, reconcile.Platform):
        raise RuntimeError("the operator's startup handler has not run")
    return p


class KopfView:
    """``reconcile.View`` over kopf's indexes (updated before any handler of the same event)."""

    def __init__(
        self,
        agents: kopf.Index[Key, Any],
        models: kopf.Index[Key, Any],
        deployments: kopf.Index[Key, Any],
    ) -> None:
        self._agents = agents
        self._models = models
        self._deployments = deployments

    @staticmethod
    def _one(index: kopf.Index[Key, Any], key: Key) -> dict[str, Any] | None:
        for value in index.get(key, ()):
            return dict(value)
        return None

    def agent(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._one(self._agents, (namespace, name))

    def model(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._one(self._models, (namespace, name))

    def models(self) -> list[dict[str, Any]]:
        return [dict(value) for key in self._models for value in self._models[key]]

    def agents(self) -> list[dict[str, Any]]:
        return [dict(value) for key in self._agents for value in self._agents[key]]

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._one(self._deployments, (namespace, name))


Key = tuple[str, str]


@kopf.index(GROUP, VERSION, "agents")
def agent_bodies(body: kopf.Body, **_: Any) -> dict[Key, dict[str, Any]]:
    return _snapshot(body)


@kopf.index(GROUP, VERSION, "installationmodels")
def model_bodies(body: kopf.Body, **_: Any) -> dict[Key, dict[str, Any]]:
    return _snapshot(body)


# The Deployments the operator renders for Agents (its own labels): their status is the
# runtime pods' readiness, which the Agent's Available and Ready conditions mirror.
AGENT_DEPLOYMENTS = {
    "app.kubernetes.io/name": "agent",
    "app.kubernetes.io/managed-by": "ankka-operator",
}


@kopf.index("apps", "v1", "deployments", labels=AGENT_DEPLOYMENTS)
def deployment_bodies(body: kopf.Body, **_: Any) -> dict[Key, dict[str, Any]]:
    return _snapshot(body)


def _snapshot(body: kopf.Body) -> dict[Key, dict[str, Any]]:
    # The watch event's own parsed JSON, which kopf replaces (never edits) on the next event;
    # kopf's managedFields are left out, they are most of an object and nobody reads them.
    raw = {k: body[k] for k in ("apiVersion", "kind", "spec", "status") if k in body}
    raw["metadata"] = {k: v for k, v in body["metadata"].items() if k != "managedFields"}
    return {(str(body.metadata.namespace), str(body.metadata.name)): raw}


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **kwargs: Any) -> None:
    # Progress and diff-base in annotations under our own prefix: the structural schema prunes
    # unknown status fields, so kopf's default status storage would be silently dropped.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.posting.enabled = False  # kopf's per-handler Events; ours are in reconcile.record
    # Tasks carry this finalizer (the daemon and the cancellation need one): ankka's own name,
    # so kubectl shows whose it is, and the uninstall path can name it (NOTES.txt).
    settings.persistence.finalizer = TASK_FINALIZER
    settings.watching.server_timeout = 300
    await start(
        memo,
        KopfView(kwargs["agent_bodies"], kwargs["model_bodies"], kwargs["deployment_bodies"]),
    )


async def start(memo: kopf.Memo, view: reconcile.View | None = None) -> None:
    """Read the settings, build the platform, load the CA, start the periodic loop."""
    try:
        ours = Settings.from_env()
    except ConfigurationError as exc:  # retrying cannot fix a setting: stop, saying which
        raise kopf.PermanentError(str(exc)) from exc
    try:
        kube = Kube.from_environment(field_manager=ours.field_manager)
    except ConfigurationError as exc:  # no credentials: retrying will not make them
        raise kopf.PermanentError(str(exc)) from exc
    p = reconcile.Platform(kube, ours)
    try:
        await reconcile.ensure_ca(p)
        await certificates.ensure_gateway_certificate(p)
        # The gateway pod mounts this ConfigMap (not optional): render it now, even empty, so
        # a fresh install's gateway starts before any InstallationModel exists.
        await reconcile.render_models_file(p)
    except ConfigurationError as exc:  # a CA Secret holding no usable CA
        p.kube.close()
        raise kopf.PermanentError(str(exc)) from exc
    except BaseException:  # kopf retries the startup handler; that attempt builds its own
        p.kube.close()
        raise
    p.view = view  # after the render above, which lists: kopf fills the view once it watches
    if ours.metrics_port is not None:
        try:
            memo[_METRICS] = await _metrics_port(p, ours.metrics_host, ours.metrics_port)
        except OSError as exc:
            p.kube.close()
            raise kopf.PermanentError(
                f"ANKKA_OPERATOR_METRICS_PORT={ours.metrics_port}: cannot listen on "
                f"{ours.metrics_host}: {exc.strerror}"
            ) from exc
    memo[_PLATFORM] = p
    memo[_PERIODIC] = asyncio.create_task(periodic.run(p), name="ankka-periodic")
    log.info("ankka operator started; platform namespace %s", ours.namespace)


async def _metrics_port(p: reconcile.Platform, host: str, port: int) -> HealthPort:
    """Serve the platform's metrics at /metrics (plain HTTP, read only); says where."""
    sock = socket.create_server((host, port), reuse_port=False)
    sock.setblocking(False)
    served = HealthPort(
        sock, lambda _: (200, CONTENT_TYPE.encode(), p.metrics.render()), paths=("/metrics",)
    )
    await served.__aenter__()
    shown, bound = sock.getsockname()[:2]
    # Printed, not logged: the one line a script or a test reads the chosen port from.
    say(f"ankka operator: metrics on http://{shown}:{bound}/metrics")
    return served


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    await stop(memo)


async def stop(memo: kopf.Memo) -> None:
    """Cancel and await the periodic loop, close the API client."""
    task = memo.pop(_PERIODIC, None)
    if isinstance(task, asyncio.Task):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    served = memo.pop(_METRICS, None)
    if isinstance(served, HealthPort):
        await served.__aexit__(None, None, None)
    p = memo.pop(_PLATFORM, None)
    if isinstance(p, reconcile.Platform):
        await p.close()


# --- installation models --------------------------------------------------------------------


@kopf.on.resume(GROUP, VERSION, "installationmodels")
@kopf.on.create(GROUP, VERSION, "installationmodels")
@kopf.on.update(GROUP, VERSION, "installationmodels", field="spec")
async def model_changed(body: kopf.Body, memo: kopf.Memo, **kwargs: Any) -> None:
    await reconcile.reconcile_model(platform(memo), dict(body), kwargs["agents_by_model"])


@kopf.on.delete(GROUP, VERSION, "installationmodels", optional=True)
async def model_deleted(memo: kopf.Memo, **kwargs: Any) -> None:
    await reconcile.render_models_file(platform(memo), kwargs["agents_by_model"])


@kopf.index(GROUP, VERSION, "agents")
def agents_by_model(
    namespace: str | None, name: str, spec: kopf.Spec, **_: Any
) -> dict[tuple[str | None, str], str]:
    """(namespace, InstallationModel name) → the Agents that name it."""
    out: dict[tuple[str | None, str], str] = {}
    for model in spec.get("models") or []:
        if isinstance(model, dict) and isinstance(model.get("installation"), str):
            out[(namespace, model["installation"])] = name
    return out


@kopf.index(GROUP, VERSION, "agents")
def agent_accounts(namespace: str | None, name: str, **_: Any) -> dict[None, tuple[str, str]]:
    """Every Agent's ServiceAccount (namespace, name), under one key, for the TokenReview
    ClusterRoleBinding."""
    return {None: (str(namespace), name)}


def _accounts(kwargs: dict[str, Any]) -> list[tuple[str, str]]:
    index: kopf.Index[None, tuple[str, str]] = kwargs["agent_accounts"]
    return list(index.get(None, []))


@kopf.on.event(GROUP, VERSION, "installationmodels")
async def model_served_changed(event: kopf.RawEvent, memo: kopf.Memo, **kwargs: Any) -> None:
    index: kopf.Index[tuple[str, str], str] = kwargs["agents_by_model"]
    body = event["object"]
    meta = body.get("metadata") or {}
    served = event["type"] != "DELETED" and condition_status(body.get("status"), "Served") == "True"
    previous = memo.get("served")
    memo["served"] = served
    # First sight of an unserved model: its Agents' own handlers already hold them.
    if previous == served or (previous is None and not served):
        return
    key = (str(meta.get("namespace")), str(meta.get("name")))
    dependents = sorted(set(index.get(key, [])))
    if not dependents:
        return
    log.info("InstallationModel %s/%s served=%s: reconciling %s", *key, served, dependents)
    p = platform(memo)
    started = p.clock.monotonic()
    await asyncio.gather(*(agent_reconcile.reconcile_agent(p, key[0], a) for a in dependents))
    if served:
        p.metrics.release_seconds.observe(p.clock.monotonic() - started)


# --- agents ---------------------------------------------------------------------------------


@kopf.on.resume(GROUP, VERSION, "agents")
@kopf.on.create(GROUP, VERSION, "agents")
@kopf.on.update(GROUP, VERSION, "agents", field="spec")
async def agent_changed(namespace: str | None, name: str, memo: kopf.Memo, **kwargs: Any) -> None:
    p = platform(memo)
    await agent_reconcile.reconcile_agent(p, str(namespace), name)
    # The Agents it delegates to (or did) may have gained (or lost) a delegator.
    named = delegation.targets_of(kwargs.get("old")) | delegation.targets_of(kwargs.get("new"))
    for target in sorted(named - {name}):
        await agent_reconcile.reconcile_agent(p, str(namespace), target)
    # The models it names may have gained (or lost) a caller.
    await reconcile.render_models_file(p, kwargs["agents_by_model"])
    await reconcile.render_token_review_binding(p, lambda: _accounts(kwargs))


def _rollout(body: dict[str, Any]) -> tuple[Any, ...]:
    """What of a Deployment the Agent's status reads (the rest changes nothing in it)."""
    status = body.get("status") or {}
    failing = [
        (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
        for c in status.get("conditions") or []
        if c.get("type") in ("ReplicaFailure", "Progressing")
    ]
    return (
        (body.get("metadata") or {}).get("generation"),
        (body.get("spec") or {}).get("replicas"),
        *(status.get(k) for k in ("observedGeneration", "availableReplicas", "updatedReplicas")),
        tuple(failing),
    )


@kopf.on.event("apps", "v1", "deployments", labels=AGENT_DEPLOYMENTS)
async def agent_deployment_changed(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    """An Agent's Deployment changed (its pods became available or not, or it was deleted):
    reconcile the Agent, whose status says so (and which applies a deleted one again)."""
    body: dict[str, Any] = dict(event["object"])
    meta: dict[str, Any] = body.get("metadata") or {}
    seen = ("DELETED",) if event["type"] == "DELETED" else _rollout(body)
    if memo.get("rollout") == seen:
        return
    memo["rollout"] = seen
    owners = [o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Agent"]
    if owners:
        await agent_reconcile.reconcile_agent(
            platform(memo), str(meta.get("namespace")), owners[0]["name"]
        )


@kopf.on.delete(GROUP, VERSION, "agents", optional=True)
async def agent_deleted(namespace: str | None, name: str, memo: kopf.Memo, **kwargs: Any) -> None:
    p = platform(memo)
    p.statuses.pop((str(namespace), name), None)
    # The Agents it delegated to lose it as a delegator.
    for target in sorted(delegation.targets_of((kwargs.get("body") or {}).get("spec")) - {name}):
        await agent_reconcile.reconcile_agent(p, str(namespace), target)
    await reconcile.render_models_file(p, kwargs["agents_by_model"])
    await reconcile.render_token_review_binding(p, lambda: _accounts(kwargs))


# --- tasks ----------------------------------------------------------------------------------

TASK_ROUND_SECONDS = 2.0  # between rounds while a Task waits to be handed over
TASK_FINALIZER = f"{GROUP}/task-cancellation"
LEGACY_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"  # kopf's default, on older Tasks


@kopf.daemon(GROUP, VERSION, "tasks", cancellation_timeout=5.0)
async def task_followed(
    stopped: kopf.DaemonStopped, namespace: str | None, name: str, memo: kopf.Memo, **_: Any
) -> None:
    """Hand the Task to its runtime and mirror its record until it is final. One daemon per
    Task; started again for every unfinished Task when the operator starts."""
    p = platform(memo)
    async with RuntimeClients(p.identity(), timeout=30.0) as clients:
        while not stopped:
            try:
                if await task_reconcile.follow(p, str(namespace), name, clients):
                    return
            except KubeError as exc:
                log.warning("Task %s/%s: %s", namespace, name, exc)
            await stopped.wait(TASK_ROUND_SECONDS)


@kopf.on.event(GROUP, VERSION, "tasks")
async def task_legacy_finalizer(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    """Take kopf's default finalizer off a Task an older operator marked with it (kopf serves
    only the finalizer it is configured with, so that one would hold the Task forever); a Task
    being deleted is cancelled at its runtime first, as the delete handler would have."""
    body: dict[str, Any] = dict(event["object"])
    meta: dict[str, Any] = body.get("metadata") or {}
    finalizers = list(meta.get("finalizers") or [])
    if event["type"] == "DELETED" or LEGACY_FINALIZER not in finalizers:
        return
    p = platform(memo)
    if meta.get("deletionTimestamp"):
        async with RuntimeClients(p.identity(), timeout=10.0) as clients:
            await task_reconcile.cancel(p, body, clients)
    kept = [f for f in finalizers if f != LEGACY_FINALIZER]
    ops = [
        {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
        {"op": "replace", "path": "/metadata/finalizers", "value": kept},
    ]
    await p.kube.json_patch(reconcile.API_VERSION, "Task", meta["namespace"], meta["name"], ops)


@kopf.on.delete(GROUP, VERSION, "tasks")
async def task_deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Deleting a Task cancels it at its runtime."""
    p = platform(memo)
    async with RuntimeClients(p.identity(), timeout=10.0) as clients:
        await task_reconcile.cancel(p, dict(body), clients)
