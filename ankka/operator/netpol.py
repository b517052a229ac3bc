"""Pure builders for who may reach an Agent's runtime: its NetworkPolicy, and the
ClusterRoleBinding that lets runtimes check service-account tokens (TokenReview).

Called by ``ankka.operator.reconcile``; tested without a cluster
(``tests/unit/operator/test_netpol.py``) and read back from a real API server
(``tests/cluster/test_netpol.py``).

The NetworkPolicy admits, on the runtime's serving port only, the platform's gateway and
operator pods (in the platform namespace, by the chart's ``app.kubernetes.io/name`` labels) and
the Agent's declared ``spec.callers``. Kubelet probes come from the node, which the common CNIs
let through whatever the policies say; nothing else reaches the pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ankka.api.resources import AgentCaller, AgentSpec
from ankka.operator.objects import Obj, labels_for, owner_reference
from ankka.operator.settings import Settings

__all__ = [
    "GATEWAY_POD",
    "OPERATOR_POD",
    "agent_network_policy",
    "caller_peer",
    "invalid_caller",
    "model_server_policy",
    "runtime_pods",
    "token_review_binding",
]

GATEWAY_POD = {"app.kubernetes.io/name": "ankka-gateway"}
OPERATOR_POD = {"app.kubernetes.io/name": "ankka-operator"}
# Set on every namespace by the API server (1.22+): the one way to select a namespace by name.
_NAMESPACE_NAME = "kubernetes.io/metadata.name"


def runtime_pods(agent: str) -> dict[str, str]:
    """The labels that pick an Agent's runtime pods out of its namespace."""
    labels = labels_for("agent", agent)
    return {k: labels[k] for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance")}


def _in_namespace(namespace: str, pods: dict[str, str]) -> dict[str, Any]:
    return {
        "namespaceSelector": {"matchLabels": {_NAMESPACE_NAME: namespace}},
        "podSelector": {"matchLabels": dict(pods)},
    }


def invalid_caller(spec: AgentSpec) -> str | None:
    """The schema's rules for ``spec.callers``, for an Agent the API server did not check."""
    for i, caller in enumerate(spec.callers):
        if caller.agent is not None and caller.pod_selector is not None:
            return f"spec.callers[{i}]: name an agent or a podSelector, not both"
        if caller.agent is None and caller.pod_selector is None and caller.namespace is None:
            return f"spec.callers[{i}]: name an agent, a podSelector or a namespace"
    return None


def caller_peer(caller: AgentCaller, *, namespace: str) -> dict[str, Any]:
    """One ``spec.callers`` entry as a NetworkPolicy peer (``from`` item)."""
    where = caller.namespace or namespace
    if caller.agent is not None:
        return _in_namespace(where, runtime_pods(caller.agent))
    if caller.pod_selector is not None:
        return _in_namespace(where, caller.pod_selector.match_labels)
    return {"namespaceSelector": {"matchLabels": {_NAMESPACE_NAME: where}}}


def _policy(
    *,
    namespace: str,
    name: str,
    labels: dict[str, str],
    owner: dict[str, Any],
    peers: list[dict[str, Any]],
    port: int,
) -> Obj:
    """Ingress to the pods of ``name`` (picked by name and instance labels) from ``peers`` on
    ``port`` only; egress is not restricted."""
    pods = {k: labels[k] for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance")}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [owner],
        },
        "spec": {
            "podSelector": {"matchLabels": pods},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": peers, "ports": [{"protocol": "TCP", "port": port}]}],
        },
    }


def _platform(settings: Settings) -> list[dict[str, Any]]:
    return [
        _in_namespace(settings.namespace, GATEWAY_POD),
        _in_namespace(settings.namespace, OPERATOR_POD),
    ]


def agent_network_policy(
    *,
    namespace: str,
    name: str,
    uid: str,
    spec: AgentSpec,
    settings: Settings,
    port: int,
    delegators: Sequence[str] = (),
) -> Obj:
    """Ingress to the Agent's runtime pods: the gateway, the operator, ``spec.callers`` and the
    runtime pods of the Agents that delegate to it (``delegators``), on ``port`` (the
    runtime's serving port) only."""
    callers = [caller_peer(c, namespace=namespace) for c in spec.callers]
    callers += [_in_namespace(namespace, runtime_pods(d)) for d in delegators]
    return _policy(
        namespace=namespace,
        name=name,
        labels=labels_for("agent", name),
        owner=owner_reference("Agent", name, uid),
        peers=[*_platform(settings), *callers],
        port=port,
    )


def model_server_policy(
    *, namespace: str, name: str, uid: str, port: int, settings: Settings
) -> Obj:
    """Ingress to a model server the operator deploys: the gateway (which serves it) and the
    operator (which probes it) only, on its serving port; runtimes go through the gateway."""
    return _policy(
        namespace=namespace,
        name=name,
        labels=labels_for("model-server", name),
        owner=owner_reference("InstallationModel", name, uid),
        peers=_platform(settings),
        port=port,
    )


def token_review_binding(accounts: Iterable[tuple[str, str]], settings: Settings) -> Obj:
    """The chart's ClusterRoleBinding (``settings.token_review_binding``) naming every Agent's
    ServiceAccount, (namespace, name), sorted: they may create TokenReviews, nothing more.

    The chart creates the binding without subjects and the operator owns them alone, so an
    Agent deleted is dropped at the next rendering and ``helm uninstall`` removes the binding.
    """
    subjects = [
        {"kind": "ServiceAccount", "name": name, "namespace": namespace}
        for namespace, name in sorted(set(accounts))
    ]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": settings.token_review_binding},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": settings.token_review_binding,
        },
        "subjects": subjects,
    }
