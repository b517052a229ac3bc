"""Pure builders and decisions for Agents: what is wrong with one, what it waits for, the
Deployment, Service and ServiceAccount it becomes, and the status it is given.

Called by ``ankka.operator.handlers``; tested without a cluster
(``tests/unit/operator/test_agents.py``). The model settings follow the runtime's contract:
``ANKKA_MODELS_ADDRESS`` plus ``ANKKA_MODEL_<NAME>_PRESET`` / ``_MODEL`` / ``_URL`` /
``_API_KEY``, on the runtime container only; each MCP server is ``ANKKA_MCP_<NAME>_URL`` and
``ANKKA_MCP_<NAME>_HEADER_<HEADER>`` (from a Secret, through ``valueFrom``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ankka._kernel.model_names import env_name, settings_name
from ankka.api.resources import AgentSpec, SecretKeyRef
from ankka.operator import access, delegation, mcp_credentials, netpol, pods, stores
from ankka.operator.certs import agent_uri
from ankka.operator.objects import Obj, labels_for, owner_reference
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
    "invalid_reason",
    "overlay_conflict",
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


def certificate_secret_name(agent: str) -> str:
    return f"{agent}-tls"


def invalid_reason(spec: AgentSpec) -> str | None:
    """Why this Agent cannot be rendered, naming the field; None when it can."""
    names: dict[str, str] = {}  # settings name -> the first model name that became it
    for i, model in enumerate(spec.models):
        field = f"spec.models[{i}]"
        key = settings_name(model.name)
        first = names.get(key)
        if first == model.name:
            return f"{field}.name: {model.name!r} is used twice; give each model its own name"
        if first is not None:
            return (
                f"{field}.name: {model.name!r} and {first!r} are one model to the runtime "
                f"(both are configured by {env_name(model.name, '*')}); give each its own name"
            )
        names[key] = model.name
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
    spec: AgentSpec,
    settings: Settings,
    *,
    namespace: str = "",
    name: str = "",
    delegators: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The runtime container's environment: platform settings, models, MCP, who it may
    delegate to and who may delegate to it, then the user's."""
    env: list[dict[str, Any]] = [
        {"name": "ANKKA_MODULE", "value": spec.module},
        {"name": "ANKKA_TLS_DIR", "value": CERT_DIR},
    ]
    if name:
        env += token_review_env(namespace, name, settings)
        env.append({"name": "ANKKA_APPROVER_HEADER", "value": access.APPROVER_HEADER})
        env += stores.store_env(
            stores.effective_store(spec, settings, agent=name), namespace=namespace, agent=name
        )
        # The URLs in the runtime's A2A cards: its Service's, never the pod's bind address.
        env.append({"name": "ANKKA_PUBLIC_URL", "value": service_url(namespace, name)})
    env += _models_env(spec, settings)
    env += _remote_agents_env(spec)
    env += delegation.peers_env(
        spec, namespace=namespace, url_of=lambda agent: service_url(namespace, agent)
    )
    env += delegation.delegators_env(delegators, namespace=namespace)
    env += _mcp_env_vars(spec)
    env += compaction_env(spec)
    platform = {e["name"] for e in env}
    # pods.overlay_conflict refuses a user's variable the operator sets; skipped here too, so
    # a rendering never carries two of one name.
    env += [e.rendered() for e in spec.env if e.name not in platform]
    return env


def _models_env(spec: AgentSpec, settings: Settings) -> list[dict[str, Any]]:
    """``ANKKA_MODEL_<NAME>_*`` of each model, named by the one mapping (``env_name``)."""
    env: list[dict[str, Any]] = []
    if any(m.installation is not None for m in spec.models):
        env.append({"name": "ANKKA_MODELS_ADDRESS", "value": settings.models_address})
    for model in spec.models:
        prefix = env_name(model.name, "")
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
    return env


def _remote_agents_env(spec: AgentSpec) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = []
    for remote in spec.remote_agents:
        # The runtime's contract (ankka/runtime/providers/remote_agents.py): _CARD_URL, _TOKEN
        # (only ever through valueFrom).
        prefix = f"ANKKA_A2A_REMOTE_{_mcp_env(remote.name)}_"
        env.append({"name": prefix + "CARD_URL", "value": remote.card_url})
        if remote.token_secret is not None:
            env.append(_from_secret(prefix + "TOKEN", remote.token_secret))
    return env


def _mcp_env_vars(spec: AgentSpec) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = []
    for server in spec.mcp_servers:
        # The runtime's contract (ankka/runtime/features/mcp/config.py): _URL, _HEADER_<NAME>;
        # header values only ever through valueFrom, so no Secret's value is in the Deployment.
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
    return env


def overlay_conflict(
    spec: AgentSpec, settings: Settings, *, namespace: str, name: str
) -> str | None:
    """Why the spec's pod settings cannot be merged into the runtime's pod (a variable the
    operator sets, a selector label), naming the field; None when they can."""
    owned = runtime_env(
        spec.model_copy(update={"env": []}), settings, namespace=namespace, name=name
    )
    return pods.overlay_conflict(spec, env=(e["name"] for e in owned))


def _runtime_container(
    spec: AgentSpec, settings: Settings, *, namespace: str, name: str, delegators: Sequence[str]
) -> dict[str, Any]:
    """The runtime container: ``ankka serve`` over mTLS on RUNTIME_PORT, probes on PROBE_PORT,
    the policy from the access file, the store from ANKKA_STORE (a DSN stays out of args)."""
    return {
        "name": "runtime",
        "image": spec.image,
        # Kubernetes expands $(ANKKA_MODULE) from the container's env.
        "args": [
            *("ankka", "serve", "$(ANKKA_MODULE)"),
            *("--host", "0.0.0.0", "--port", str(RUNTIME_PORT)),
            *("--tls-dir", CERT_DIR, "--probe-port", str(PROBE_PORT)),
            *("--access-file", access.ACCESS_FILE),
        ],
        "ports": [
            {"name": "https", "containerPort": RUNTIME_PORT},
            {"name": "probe", "containerPort": PROBE_PORT},
        ],
        "env": runtime_env(spec, settings, namespace=namespace, name=name, delegators=delegators),
        "volumeMounts": [
            {"name": "tls", "mountPath": CERT_DIR, "readOnly": True},
            {"name": "access", "mountPath": access.ACCESS_DIR, "readOnly": True},
            {"name": "data", "mountPath": stores.DATA_DIR},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "probe"}},
        "securityContext": pods.container_security(spec, read_only_root=True),
    }


def _pod_spec(
    spec: AgentSpec, settings: Settings, *, namespace: str, name: str, delegators: Sequence[str]
) -> Obj:
    runtime = _runtime_container(
        spec, settings, namespace=namespace, name=name, delegators=delegators
    )
    pod_spec: dict[str, Any] = {
        # Service links would add e.g. ANKKA_MODEL_X_PORT=tcp://... for a Service named
        # ankka-model-x, inside the runtime's ANKKA_MODEL_<NAME>_* settings.
        "enableServiceLinks": False,
        "serviceAccountName": name,
        "securityContext": pods.pod_security(spec, default_user=pods.RUNTIME_USER),
        "containers": [runtime],
        "volumes": [
            {"name": "tls", "secret": {"secretName": certificate_secret_name(name)}},
            {"name": "access", "configMap": {"name": f"{name}-access"}},
            stores.store_volume(stores.effective_store(spec, settings, agent=name)),
            {"name": "tmp", "emptyDir": {}},
        ],
    }
    # The overlay adds to the container and the pod; the runtime keeps its args, ports,
    # probe, mounts, volumes (the certificate) and ServiceAccount (its identity).
    pods.apply_overlay(pod_spec, runtime, spec)
    return pod_spec


def _deployment_spec(
    spec: AgentSpec,
    settings: Settings,
    *,
    namespace: str,
    name: str,
    held: bool,
    digest: str,
    delegators: Sequence[str],
) -> Obj:
    """The runtime's Deployment spec: no replicas while held; its pods roll when the policy
    (the access file's digest) changes."""
    labels = labels_for("agent", name)
    template = {
        "metadata": pods.template_metadata(labels, spec),
        "spec": _pod_spec(spec, settings, namespace=namespace, name=name, delegators=delegators),
    }
    # The runtime reads its access file at start: a changed policy rolls the pods.
    template["metadata"].setdefault("annotations", {})[access.DIGEST_ANNOTATION] = digest
    store = stores.effective_store(spec, settings, agent=name)
    return {
        "replicas": 0 if held else spec.replicas,
        "selector": {"matchLabels": labels},
        "template": template,
        # One writer for an SQLite file on a claim: the old pod goes before the new one.
        **({"strategy": {"type": "Recreate"}} if store.sqlite and store.sqlite.claim_name else {}),
    }


def agent_children(
    *,
    namespace: str,
    name: str,
    uid: str,
    spec: AgentSpec,
    settings: Settings,
    held: bool,
    delegators: Sequence[str] = (),
) -> list[Obj]:
    """ServiceAccounts (the runtime's, ankka approve's delegate), the Role and RoleBinding of
    its MCP credentials Secret (only when it keeps them in one), the access file's ConfigMap,
    a Service, a Deployment and (unless switched off) a NetworkPolicy, in that order, so the
    pods' ConfigMap and grant are there first; a held Agent's Deployment has no replicas.
    ``delegators``: the Agents whose ``spec.delegatesTo`` name this one (its ANKKA_DELEGATORS
    and callers)."""
    labels = labels_for("agent", name)
    owner = [owner_reference("Agent", name, uid)]

    base = {"name": name, "namespace": namespace, "labels": labels, "ownerReferences": owner}

    def meta(**extra: Any) -> dict[str, Any]:
        return {**base, **extra}

    sa_meta = meta(**pods.annotations_meta(spec.service_account_annotations))
    service_account: Obj = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": sa_meta}
    policy, digest = access.access_configmap(spec, namespace=namespace, name=name, meta=meta())
    service: Obj = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(),
        "spec": {
            "selector": labels,
            "ports": [{"name": "https", "port": SERVICE_PORT, "targetPort": "https"}],
        },
    }
    deployment: Obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(annotations={HELD_ANNOTATION: "true" if held else "false"}),
        "spec": _deployment_spec(
            spec,
            settings,
            namespace=namespace,
            name=name,
            held=held,
            digest=digest,
            delegators=delegators,
        ),
    }
    children = [
        service_account,
        access.approver_account(meta=meta(), name=name),
        *mcp_credentials.credentials_rbac(spec, namespace=namespace, name=name, meta=meta()),
        policy,
        service,
        deployment,
    ]
    if settings.network_policies:
        children.append(
            netpol.agent_network_policy(
                namespace=namespace,
                name=name,
                uid=uid,
                spec=spec,
                settings=settings,
                port=RUNTIME_PORT,
                delegators=delegators,
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


def service_url(namespace: str, name: str) -> str:
    """The Agent's runtime as its callers in the cluster reach it (its Service, over TLS)."""
    return f"https://{name}.{namespace}.svc:{SERVICE_PORT}"


def a2a_card_url(namespace: str, name: str) -> str:
    """Where the Agent's A2A card is (the host root: its only agent's, or its default's)."""
    return f"{service_url(namespace, name)}/.well-known/agent-card.json"
