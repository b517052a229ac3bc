"""Pure builders and decisions for Agents: what is wrong with one, what it waits for, the
Deployment, Service and ServiceAccount it becomes, and the status it is given.

Called by ``ankka.operator.handlers``; tested without a cluster
(``tests/unit/test_operator_agents.py``). The model settings follow the runtime's contract:
``ANKKA_MODELS_ADDRESS`` plus ``ANKKA_MODEL_<NAME>_PRESET`` / ``_MODEL`` / ``_URL`` /
``_API_KEY``, on the runtime container only; each MCP server is ``ANKKA_MCP_<NAME>_URL`` and
``ANKKA_MCP_<NAME>_HEADER_<HEADER>`` (from a Secret, through ``valueFrom``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from ankka.api.resources import AgentSpec, ConditionStatus, SecretKeyRef
from ankka.operator import netpol
from ankka.operator.certs import agent_uri
from ankka.operator.objects import Obj, condition, labels_for, owner_reference, set_condition
from ankka.operator.settings import Settings

__all__ = [
    "CERT_DIR",
    "PROBE_PORT",
    "RUNTIME_PORT",
    "SERVICE_PORT",
    "agent_children",
    "awaited_models",
    "certificate_secret_name",
    "compaction_env",
    "failed_status",
    "invalid_reason",
    "rendered_status",
    "runtime_env",
    "token_review_env",
]

# The runtime serves its API over mTLS on RUNTIME_PORT with the Agent's certificate (which
# names the Service's DNS names), behind the Service's SERVICE_PORT; kubelet, which has no
# client certificate, probes /healthz and /readyz on the plain PROBE_PORT (nothing else there).
RUNTIME_PORT = 8080
PROBE_PORT = 8081
SERVICE_PORT = 443
CERT_DIR = "/var/run/ankka/tls"
# The runtime's session store: SQLite on a volume of the pod's own (an emptyDir, kept while
# the pod lives), since the image's working directory is not the runtime user's to write.
DATA_DIR = "/var/lib/ankka"
STORE = f"sqlite:///{DATA_DIR}/sessions.sqlite3"


def certificate_secret_name(agent: str) -> str:
    return f"{agent}-tls"


def invalid_reason(spec: AgentSpec) -> str | None:
    """Why this Agent cannot be rendered, naming the field; None when it can."""
    seen: set[str] = set()
    for i, model in enumerate(spec.models):
        field = f"spec.models[{i}]"
        if model.name in seen:
            return f"{field}.name: {model.name!r} is used twice; give each model its own name"
        seen.add(model.name)
        if model.installation is not None:
            if model.address is not None:
                return (
                    f"{field}.address: model {model.name!r} is an installation model, which "
                    "is reached through the platform's gateway (ANKKA_MODELS_ADDRESS); "
                    "remove the address"
                )
            if model.api_key_secret_ref is not None:
                return (
                    f"{field}.apiKeySecretRef: model {model.name!r} is an installation model, "
                    "which authenticates with the agent's certificate; remove the key"
                )
            if model.preset is not None:
                return (
                    f"{field}.preset: model {model.name!r} names both an installation model "
                    "and a hosted preset; keep one"
                )
        elif model.preset is None:
            return (
                f"{field}: model {model.name!r} names neither an installation model "
                "(installation) nor a hosted preset (preset)"
            )
    return _invalid_mcp(spec) or netpol.invalid_caller(spec)


def _mcp_env(name: str) -> str:
    return name.upper().replace("-", "_")


def _invalid_mcp(spec: AgentSpec) -> str | None:
    seen: dict[str, str] = {}
    for i, server in enumerate(spec.mcp_servers):
        field = f"spec.mcpServers[{i}]"
        env = _mcp_env(server.name)
        if env in seen:
            return (
                f"{field}.name: {server.name!r} and {seen[env]!r} both become "
                f"ANKKA_MCP_{env}_*; give each server its own name"
            )
        seen[env] = server.name
        if "_HEADER_" in f"_{env}_":
            return (
                f"{field}.name: {server.name!r} contains 'header' between separators, which "
                "makes its ANKKA_MCP_* settings ambiguous; rename it"
            )
        headers = [_mcp_env(h.name) for h in server.headers]
        twice = sorted({h for h in headers if headers.count(h) > 1})
        if twice:
            return f"{field}.headers: header {twice[0]!r} is given twice"
    return None


def awaited_models(spec: AgentSpec, served: Mapping[str, bool]) -> list[str]:
    """The InstallationModels this Agent names that are not Served yet, sorted."""
    names = {m.installation for m in spec.models if m.installation is not None}
    return sorted(n for n in names if not served.get(n, False))


def compaction_env(spec: AgentSpec) -> list[dict[str, Any]]:
    """``spec.compaction`` as the runtime's ``ANKKA_COMPACTION_*`` settings (set fields only)."""
    if spec.compaction is None:
        return []
    fields = spec.compaction.model_dump(exclude_none=True)
    return [{"name": f"ANKKA_COMPACTION_{k.upper()}", "value": str(v)} for k, v in fields.items()]


def token_review_env(namespace: str, name: str, settings: Settings) -> list[dict[str, Any]]:
    """Where the runtime checks service-account tokens; the audience is the Agent's own
    identity, so a token meant for one runtime cannot be replayed to another."""
    if not settings.token_review_url:
        return []
    return [
        {"name": "ANKKA_TOKEN_REVIEW_URL", "value": settings.token_review_url},
        {"name": "ANKKA_TOKEN_REVIEW_AUDIENCE", "value": agent_uri(namespace, name)},
    ]


def _from_secret(name: str, ref: SecretKeyRef) -> dict[str, Any]:
    """A variable whose value stays in its Secret (never in the Deployment)."""
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}


def runtime_env(
    spec: AgentSpec, settings: Settings, *, namespace: str = "", name: str = ""
) -> list[dict[str, Any]]:
    """The runtime container's environment: platform settings, models, MCP, then the user's."""
    env: list[dict[str, Any]] = [
        {"name": "ANKKA_MODULE", "value": spec.module},
        {"name": "ANKKA_TLS_DIR", "value": CERT_DIR},
    ]
    if name:
        env += token_review_env(namespace, name, settings)
        # The URLs in the runtime's A2A cards: its Service's, never the pod's bind address.
        env.append({"name": "ANKKA_PUBLIC_URL", "value": service_url(namespace, name)})
    if any(m.installation is not None for m in spec.models):
        env.append({"name": "ANKKA_MODELS_ADDRESS", "value": settings.models_address})
    for model in spec.models:
        prefix = f"ANKKA_MODEL_{model.name.upper()}_"
        if model.installation is not None:
            env.append({"name": prefix + "PRESET", "value": "installation"})
            env.append({"name": prefix + "MODEL", "value": model.installation})
            continue
        assert model.preset is not None  # invalid_reason() refuses a model with neither
        env.append({"name": prefix + "PRESET", "value": model.preset.value})
        if model.model is not None:
            env.append({"name": prefix + "MODEL", "value": model.model})
        if model.address is not None:
            env.append({"name": prefix + "URL", "value": model.address})
        if model.api_key_secret_ref is not None:
            env.append(_from_secret(prefix + "API_KEY", model.api_key_secret_ref))
    for remote in spec.remote_agents:
        # The runtime's contract (ankka/runtime/providers/a2a_remote.py): _CARD_URL, _TOKEN
        # (only ever through valueFrom).
        prefix = f"ANKKA_A2A_REMOTE_{_mcp_env(remote.name)}_"
        env.append({"name": prefix + "CARD_URL", "value": remote.card_url})
        if remote.token_secret is not None:
            env.append(_from_secret(prefix + "TOKEN", remote.token_secret))
    for server in spec.mcp_servers:
        # The runtime's contract (ankka/runtime/features/mcp/config.py): _URL, _HEADER_<NAME>;
        # header
        # values only ever through valueFrom, so no Secret's value is in the Deployment.
        prefix = f"ANKKA_MCP_{_mcp_env(server.name)}_"
        env.append({"name": prefix + "URL", "value": server.url})
        approval = server.requires_approval
        if approval is not None and (approval.all or approval.tools):
            which = "all" if approval.all else ",".join(approval.tools)
            env.append({"name": prefix + "REQUIRES_APPROVAL", "value": which})
        for header in server.headers:
            ref = header.secret_key_ref
            env.append(
                {
                    "name": f"{prefix}HEADER_{_mcp_env(header.name)}",
                    "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
                }
            )
    env += compaction_env(spec)
    platform = {e["name"] for e in env}
    env += [{"name": e.name, "value": e.value} for e in spec.env if e.name not in platform]
    return env


def agent_children(
    *,
    namespace: str,
    name: str,
    uid: str,
    spec: AgentSpec,
    settings: Settings,
    held: bool,
) -> list[Obj]:
    """ServiceAccount, Service, Deployment and (unless switched off) NetworkPolicy; a held
    Agent's Deployment has no replicas."""
    labels = labels_for("agent", name)
    owner = [owner_reference("Agent", name, uid)]

    def meta(**extra: Any) -> dict[str, Any]:
        return {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": owner,
            **extra,
        }

    service_account: Obj = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta()}
    service: Obj = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(),
        "spec": {
            "selector": labels,
            "ports": [{"name": "https", "port": SERVICE_PORT, "targetPort": "https"}],
        },
    }
    runtime = {
        "name": "runtime",
        "image": spec.image,
        # Kubernetes expands $(ANKKA_MODULE) from the container's env.
        "args": [
            "ankka",
            "serve",
            "$(ANKKA_MODULE)",
            "--host",
            "0.0.0.0",
            "--port",
            str(RUNTIME_PORT),
            "--tls-dir",
            CERT_DIR,
            "--probe-port",
            str(PROBE_PORT),
            "--store",
            STORE,
        ],
        "ports": [
            {"name": "https", "containerPort": RUNTIME_PORT},
            {"name": "probe", "containerPort": PROBE_PORT},
        ],
        "env": runtime_env(spec, settings, namespace=namespace, name=name),
        "volumeMounts": [
            {"name": "tls", "mountPath": CERT_DIR, "readOnly": True},
            {"name": "data", "mountPath": DATA_DIR},
        ],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "probe"}},
    }
    deployment: Obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(annotations={HELD_ANNOTATION: "true" if held else "false"}),
        "spec": {
            "replicas": 0 if held else spec.replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    # Service links would add e.g. ANKKA_MODEL_X_PORT=tcp://... for a Service
                    # named ankka-model-x, inside the runtime's ANKKA_MODEL_<NAME>_* settings.
                    "enableServiceLinks": False,
                    "serviceAccountName": name,
                    "containers": [runtime],
                    "volumes": [
                        {
                            "name": "tls",
                            "secret": {"secretName": certificate_secret_name(name)},
                        },
                        {"name": "data", "emptyDir": {}},
                    ],
                },
            },
        },
    }
    children = [service_account, service, deployment]
    if settings.network_policies:
        children.append(
            netpol.agent_network_policy(
                namespace=namespace,
                name=name,
                uid=uid,
                spec=spec,
                settings=settings,
                port=RUNTIME_PORT,
            )
        )
    return children


HELD_ANNOTATION = "ankka.dev/held"


def release_patch(applied: Obj, rendered: Obj) -> Obj | None:
    """The merge patch that turns the Deployment ``applied`` into ``rendered`` when they
    differ only in what holding or releasing an Agent changes (``spec.replicas`` and the held
    annotation); None when anything else differs, or nothing does."""

    def rest(obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        annotations = {k: v for k, v in (meta.get("annotations") or {}).items()}
        annotations.pop(HELD_ANNOTATION, None)
        spec = {k: v for k, v in (obj.get("spec") or {}).items() if k != "replicas"}
        return {**obj, "metadata": {**meta, "annotations": annotations}, "spec": spec}

    if applied.get("kind") != "Deployment" or rest(applied) != rest(rendered):
        return None
    patch: Obj = {}
    held = ((rendered.get("metadata") or {}).get("annotations") or {}).get(HELD_ANNOTATION)
    if held != ((applied.get("metadata") or {}).get("annotations") or {}).get(HELD_ANNOTATION):
        patch["metadata"] = {"annotations": {HELD_ANNOTATION: held}}
    replicas = (rendered.get("spec") or {}).get("replicas")
    if replicas != (applied.get("spec") or {}).get("replicas"):
        patch["spec"] = {"replicas": replicas}
    return patch or None


# --- status ---------------------------------------------------------------------------------


def _status(
    previous: Mapping[str, Any] | None,
    new_conditions: Sequence[dict[str, Any]],
    *,
    generation: int | None,
    fields: Mapping[str, Any],
) -> Obj:
    conditions = list((previous or {}).get("conditions") or [])
    for new in new_conditions:
        conditions = set_condition(conditions, new)
    return {**fields, "conditions": conditions, "observedGeneration": generation}


def failed_status(
    previous: Mapping[str, Any] | None,
    *,
    reason: str,
    generation: int | None,
    now: dt.datetime,
) -> Obj:
    """An Agent that cannot be rendered: ``Failed``, ``Ready=False`` (``InvalidSpec``) saying
    why. Fields written before (``awaitingModels``, the certificate's expiry) are left alone."""
    ready = condition("Ready", ConditionStatus.FALSE, "InvalidSpec", reason, now=now)
    return _status(previous, [ready], generation=generation, fields={"phase": "Failed"})


def service_url(namespace: str, name: str) -> str:
    """The Agent's runtime as its callers in the cluster reach it (its Service, over TLS)."""
    return f"https://{name}.{namespace}.svc:{SERVICE_PORT}"


def a2a_card_url(namespace: str, name: str) -> str:
    """Where the Agent's A2A card is (the host root: its only agent's, or its default's)."""
    return f"{service_url(namespace, name)}/.well-known/agent-card.json"


def rendered_status(
    previous: Mapping[str, Any] | None,
    *,
    awaited: Sequence[str],
    replicas: int,
    certificate_not_after: str,
    generation: int | None,
    now: dt.datetime,
    a2a_card_url: str | None = None,
) -> Obj:
    """A rendered Agent: ``Held`` while any InstallationModel it names is not served (named in
    ``ModelsServed`` and ``awaitingModels``), ``Ready`` once every one is. A condition whose
    status did not change keeps its ``lastTransitionTime``."""
    if awaited:
        served = condition(
            "ModelsServed",
            ConditionStatus.FALSE,
            "Awaiting",
            "waiting for InstallationModels: " + ", ".join(awaited),
            now=now,
        )
        ready = condition(
            "Ready",
            ConditionStatus.FALSE,
            "Held",
            "held with 0 replicas until its models are served",
            now=now,
        )
        phase = "Held"
    else:
        served = condition(
            "ModelsServed",
            ConditionStatus.TRUE,
            "AllServed",
            "every installation model it names is served",
            now=now,
        )
        ready = condition(
            "Ready",
            ConditionStatus.TRUE,
            "Rendered",
            f"rendered with {replicas} replica(s)",
            now=now,
        )
        phase = "Ready"
    fields = {
        "phase": phase,
        "awaitingModels": list(awaited),
        "certificateNotAfter": certificate_not_after,
    }
    if a2a_card_url is not None:
        fields["a2aCardUrl"] = a2a_card_url
    return _status(previous, [served, ready], generation=generation, fields=fields)
