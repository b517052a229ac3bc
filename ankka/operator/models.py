"""Pure builders for InstallationModels: their server's children, the gateway's models file,
and the status a probe result becomes.

Called by ``ankka.operator.handlers``; no I/O here, so every rendering is tested without a
cluster (``tests/unit/operator/test_models.py``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import yaml

from ankka.api.capabilities import ModelCapabilities, UpstreamKind
from ankka.api.resources import (
    ConditionStatus,
    EndpointKind,
    InstallationModelSpec,
    ModelServer,
    ServerKind,
)
from ankka.operator import pods
from ankka.operator.certs import agent_uri
from ankka.operator.netpol import model_server_policy
from ankka.operator.objects import (
    Obj,
    condition,
    labels_for,
    owner_reference,
    set_condition,
    timestamp,
)
from ankka.operator.server_pods import Trouble, running_condition
from ankka.operator.settings import Settings

__all__ = [
    "DEFAULT_PORTS",
    "ServedModel",
    "callers_of",
    "deployed_condition",
    "models_configmap",
    "models_file",
    "probe_target",
    "served_status",
    "server_children",
    "status_worth_writing",
]

DEFAULT_PORTS: dict[ServerKind, int] = {
    ServerKind.OLLAMA: 11434,
    ServerKind.LLAMACPP: 8080,
    ServerKind.VLLM: 8000,
}
_GATEWAY_KIND: dict[ServerKind, UpstreamKind] = {
    ServerKind.OLLAMA: "ollama",
    ServerKind.LLAMACPP: "llamacpp",
    ServerKind.VLLM: "openai",
}
_MODEL_ARGS: dict[ServerKind, tuple[str, ...]] = {
    ServerKind.OLLAMA: (),
    ServerKind.LLAMACPP: ("--host", "0.0.0.0", "--port"),
    ServerKind.VLLM: ("--host", "0.0.0.0", "--port"),
}


# The models file's limits that each gateway process keeps in its own memory (docs/gateway.md,
# "Limits across gateway replicas").
_LIMITS = ("max_concurrency", "max_in_flight_per_caller", "tokens_per_minute_per_caller")


@dataclass(frozen=True, slots=True)
class ServedModel:
    """One line of the gateway's models file."""

    name: str
    kind: UpstreamKind
    url: str
    capabilities: tuple[str, ...] = ()
    max_concurrency: int | None = None
    max_in_flight_per_caller: int | None = None
    tokens_per_minute_per_caller: int | None = None
    # The model's name on its server (an Ollama tag, a vLLM path); runtimes address the
    # gateway by the InstallationModel's name, and the gateway renames the request upstream.
    upstream_model: str | None = None
    # Who may use it (the service identities of the Agents that name it); None: not rendered.
    callers: tuple[str, ...] | None = None

    def per_gateway(self, gateways: int) -> ServedModel:
        """This model's limits as one of ``gateways`` gateway processes enforces them: each
        its share (the limit divided, rounded down, at least 1), so together they allow the
        limit (more only when a limit is below the number of gateways)."""
        if gateways <= 1:
            return self

        def share(limit: int | None) -> int | None:
            return None if limit is None else max(1, limit // gateways)

        return replace(
            self,
            max_concurrency=share(self.max_concurrency),
            max_in_flight_per_caller=share(self.max_in_flight_per_caller),
            tokens_per_minute_per_caller=share(self.tokens_per_minute_per_caller),
        )

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "url": self.url}
        if self.upstream_model is not None and self.upstream_model != self.name:
            out["upstream_model"] = self.upstream_model
        if self.capabilities:
            out["capabilities"] = list(self.capabilities)
        for key in _LIMITS:
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.callers is not None:
            out["callers"] = list(self.callers)
        return out


def callers_of(
    namespace: str, name: str, agents_by_model: Mapping[tuple[str, str], Iterable[str]]
) -> tuple[str, ...]:
    """The service identities of the Agents in ``namespace`` that name this model, sorted.

    The gateway serves the model to these callers only (an Agent's ``spec.models`` is what
    its runtime may use); a model no Agent names is rendered with ``callers: []``.
    """
    agents = agents_by_model.get((namespace, name), ())
    return tuple(sorted({agent_uri(namespace, agent) for agent in agents}))


def _port(server: ModelServer) -> int:
    return server.port or DEFAULT_PORTS[server.kind]


def probe_target(
    namespace: str,
    name: str,
    spec: InstallationModelSpec,
    *,
    callers: tuple[str, ...] | None = None,
) -> ServedModel:
    """Where the gateway (and the probe) reaches this model, how, and for whom."""
    if spec.endpoint is not None:
        kind: UpstreamKind = spec.endpoint.kind.value
        url = spec.endpoint.url.rstrip("/")
    else:
        assert spec.server is not None  # the CRD's rule: exactly one of server or endpoint
        kind = _GATEWAY_KIND[spec.server.kind]
        url = f"http://{name}.{namespace}.svc:{_port(spec.server)}"
    declared = tuple(spec.capabilities) if kind == EndpointKind.OPENAI.value else ()
    return ServedModel(
        name=name,
        kind=kind,
        url=url,
        capabilities=declared,
        max_concurrency=spec.max_concurrency,
        max_in_flight_per_caller=spec.max_in_flight_per_caller,
        tokens_per_minute_per_caller=spec.tokens_per_minute_per_caller,
        upstream_model=spec.model,
        callers=callers,
    )


def models_file(models: Iterable[ServedModel]) -> str:
    """The gateway's models file: a YAML list, sorted by name so it renders byte-stably."""
    rows = [m.as_dict() for m in sorted(models, key=lambda m: m.name)]
    return yaml.safe_dump(rows, sort_keys=False)


def models_configmap(settings: Settings, models: Iterable[ServedModel]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": settings.models_configmap,
            "namespace": settings.namespace,
            "labels": {"app.kubernetes.io/part-of": "ankka", "ankka.dev/role": "models-file"},
        },
        "data": {
            "models.yaml": models_file(m.per_gateway(settings.gateway_replicas) for m in models)
        },
    }


def server_children(
    namespace: str,
    name: str,
    uid: str,
    spec: InstallationModelSpec,
    settings: Settings | None = None,
) -> list[Obj]:
    """The Deployment, Service and (with ``settings.network_policies``) NetworkPolicy serving
    a model the operator deploys (none when adopted)."""
    server = spec.server
    if server is None:
        return []
    labels = labels_for("model-server", name)
    owner = [owner_reference("InstallationModel", name, uid)]
    port = _port(server)
    pod_spec = _server_pod(spec, server, name, port)
    meta = {"name": name, "namespace": namespace, "labels": labels, "ownerReferences": owner}
    service_account: Obj = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {**meta, **pods.annotations_meta(server.service_account_annotations)},
        "automountServiceAccountToken": False,
    }
    deployment: Obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": server.replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": pods.template_metadata(labels, server), "spec": pod_spec},
        },
    }
    service: Obj = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": dict(meta),
        "spec": {
            "selector": labels,
            "ports": [{"name": "http", "port": port, "targetPort": "http"}],
        },
    }
    children = [deployment, service, service_account]
    if settings is not None and settings.network_policies:
        children.append(
            model_server_policy(
                namespace=namespace, name=name, uid=uid, port=port, settings=settings
            )
        )
    return children


def _server_container(spec: InstallationModelSpec, server: ModelServer, port: int) -> Obj:
    """The model server's container: its image, port, arguments and env (the overlay's after
    the operator's own)."""
    args = list(server.args)
    if not args and _MODEL_ARGS[server.kind]:
        args = [*_MODEL_ARGS[server.kind], str(port)]
        args += ["--model", spec.model] if server.kind is ServerKind.VLLM else ["-m", spec.model]
    container: dict[str, Any] = {
        "name": "server",
        "image": server.image,
        "ports": [{"name": "http", "containerPort": port}],
        # Most model servers write caches into their image's home: read-only only if asked.
        "securityContext": pods.container_security(server, read_only_root=False),
        # A server that dies without writing a termination message (most do) leaves its log's
        # last lines there instead, which the ServerRunning condition shows (server_pods.py).
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if args:
        container["args"] = args
    env = (
        [{"name": "OLLAMA_HOST", "value": f"0.0.0.0:{port}"}]
        if server.kind is ServerKind.OLLAMA
        else []
    )
    env += [e.rendered() for e in server.env if e.name not in {v["name"] for v in env}]
    if env:
        container["env"] = env
    return container


def _server_pod(spec: InstallationModelSpec, server: ModelServer, name: str, port: int) -> Obj:
    """The model server's pod spec, the overlay merged in."""
    container = _server_container(spec, server, port)
    # No service-link variables: a model server reads settings from its environment too.
    pod_spec: dict[str, Any] = {
        "enableServiceLinks": False,
        "serviceAccountName": name,
        "automountServiceAccountToken": False,  # a model server never calls the API server
        # The image's own user (numeric, or set securityContext.runAsUser), never root.
        "securityContext": pods.pod_security(server, default_user=None),
        "containers": [container],
    }
    pods.apply_overlay(pod_spec, container, server)
    return pod_spec


def deployed_condition(spec: InstallationModelSpec, *, now: dt.datetime) -> dict[str, Any]:
    if spec.server is None:
        return condition(
            "Deployed", ConditionStatus.TRUE, "Adopted", "serving from spec.endpoint", now=now
        )
    return condition(
        "Deployed",
        ConditionStatus.TRUE,
        "Rendered",
        f"Deployment and Service applied with {spec.server.replicas} replica(s)",
        now=now,
    )


def served_status(
    previous: dict[str, Any],
    *,
    spec: InstallationModelSpec,
    target: ServedModel,
    probed: ModelCapabilities | None,
    error: str | None,
    generation: int | None,
    now: dt.datetime,
    trouble: Trouble | None = None,
) -> dict[str, Any]:
    """The status after one probe: ``probed`` on success, ``error`` (words) on failure, and
    ``trouble`` when the server's container keeps dying (the ``ServerRunning`` condition)."""
    conditions = list(previous.get("conditions") or [])
    conditions = set_condition(conditions, deployed_condition(spec, now=now))
    running = running_condition(conditions, trouble, served=probed is not None, now=now)
    if running is not None:
        conditions = set_condition(conditions, running)
    status: dict[str, Any] = {
        "url": target.url,
        "lastProbeTime": timestamp(now),
        "observedGeneration": generation,
    }
    if probed is not None:
        words = probed.words()
        message = f"capabilities: {', '.join(words) or 'none'}"
        conditions = set_condition(
            conditions, condition("Served", ConditionStatus.TRUE, "Probed", message, now=now)
        )
        status["capabilities"] = words
        status["thinkingValues"] = [str(v).lower() for v in probed.thinking_values]
        status["contextLength"] = probed.context_length
    else:
        conditions = set_condition(
            conditions,
            condition("Served", ConditionStatus.FALSE, "ProbeFailed", error or "", now=now),
        )
        status["capabilities"] = list(previous.get("capabilities") or [])
        status["contextLength"] = previous.get("contextLength")
    status["conditions"] = conditions
    return status


def status_worth_writing(
    previous: dict[str, Any],
    new: dict[str, Any],
    *,
    spec: InstallationModelSpec,
    now: dt.datetime,
) -> bool:
    """Whether a probe's status must be written: something changed besides the probe time, or
    the recorded probe time is older than ``probeIntervalSeconds``.

    An unserved model is probed every tick; writing each identical failure would cost a write
    and a watch event per model per tick for nothing.
    """

    def essence(status: dict[str, Any]) -> dict[str, Any]:
        # A null field is not stored (the merge patch removes it), so None equals absent.
        return {k: v for k, v in status.items() if k != "lastProbeTime" and v is not None}

    if essence(previous) != essence(new):
        return True
    last = previous.get("lastProbeTime")
    if not isinstance(last, str):
        return True
    recorded = dt.datetime.fromisoformat(last.replace("Z", "+00:00"))
    return now - recorded >= dt.timedelta(seconds=spec.probe_interval_seconds)
