"""Pure: the Role an Agent's runtime needs for MCP OAuth credentials kept in a Secret.

An Agent whose ``spec.env`` sets ``ANKKA_MCP_CREDENTIALS`` to ``secret:NAME`` (a ``value``:
one from ``valueFrom`` is not known to the operator) has its runtime read and replace the Secret
NAME of its namespace with its own service account (the runtime's contract:
``ankka.runtime.features.mcp.credentials.SecretStore``: ``get``, then ``update`` with the
resourceVersion it read, or ``create`` when there is none). The operator renders a Role
``<agent>-mcp-credentials`` granting ``get`` and ``update`` on that one Secret
(``resourceNames``), and a RoleBinding of it to the Agent's ServiceAccount, both owned by the
Agent. RBAC cannot restrict ``create`` to a name (a create request carries none), so instead of
granting it the operator creates the Secret, empty, when it is absent (``empty_secret``): the
runtime then only ever reads and replaces it.

Called by ``ankka.operator.agents`` (the children) and ``agent_reconcile`` (the Secret, and the
Role's removal once the Agent no longer names a Secret); tested in
``tests/unit/operator/test_mcp_credentials.py``.
"""

from __future__ import annotations

import re
from typing import Any

from ankka.api.resources import AgentSpec
from ankka.operator.objects import Obj

__all__ = [
    "CREDENTIALS_VARIABLE",
    "RBAC",
    "RBAC_GROUP",
    "SECRET_KEY",
    "VERBS",
    "credentials_rbac",
    "credentials_secret",
    "empty_secret",
    "foreign_secret",
    "invalid_credentials",
    "role_name",
]

# The runtime's contract (ankka.runtime.declare.mcp, ...features.mcp.credentials).
CREDENTIALS_VARIABLE = "ANKKA_MCP_CREDENTIALS"
SECRET_KEY = "credentials.json"
VERBS = ("get", "update")  # what SecretStore does to an existing Secret
RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC = f"{RBAC_GROUP}/v1"
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def role_name(agent: str) -> str:
    """The Role's and the RoleBinding's name."""
    return f"{agent}-mcp-credentials"


def _setting(spec: AgentSpec) -> tuple[int, str] | None:
    """Where the variable is set and its value; the last one counts, as in the pod."""
    found = [(i, v.value) for i, v in enumerate(spec.env) if v.name == CREDENTIALS_VARIABLE]
    if not found or found[-1][1] is None:
        return None
    return found[-1][0], found[-1][1]


def credentials_secret(spec: AgentSpec) -> str | None:
    """The Secret the runtime keeps its MCP OAuth credentials in; None when it keeps none."""
    setting = _setting(spec)
    if setting is None:
        return None
    kind, _, name = setting[1].partition(":")
    return name if kind == "secret" and name else None


def invalid_credentials(spec: AgentSpec, *, agent: str, owned: frozenset[str]) -> str | None:
    """Why the Agent's credentials Secret cannot be granted, naming the field; None when it
    can. ``owned``: the Secrets the operator writes for this Agent (its certificate, its copy
    of the store's): the runtime must not be able to replace them."""
    setting = _setting(spec)
    name = credentials_secret(spec)
    if setting is None or name is None:
        return None
    field = f"spec.env[{setting[0]}].value"
    if len(name) > 253 or not _SUBDOMAIN.match(name):
        return (
            f"{field}: {CREDENTIALS_VARIABLE}=secret:{name[:80]!r} does not name a Secret "
            "(lower-case letters, digits, '-' and '.', at most 253)"
        )
    if name in owned:
        return (
            f"{field}: the Secret {name!r} is the operator's for Agent {agent!r}, which its "
            "runtime may not replace; name another Secret for the MCP credentials"
        )
    return None


def credentials_rbac(
    spec: AgentSpec, *, namespace: str, name: str, meta: dict[str, Any]
) -> list[Obj]:
    """The Role and its RoleBinding to the Agent's ServiceAccount (named like the Agent), or
    nothing when the runtime keeps no credentials in a Secret. ``meta``: the children's
    metadata (labels, owner)."""
    secret = credentials_secret(spec)
    if secret is None:
        return []
    role: Obj = {
        "apiVersion": RBAC,
        "kind": "Role",
        "metadata": {**meta, "name": role_name(name), "namespace": namespace},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "resourceNames": [secret],
                "verbs": list(VERBS),
            }
        ],
    }
    binding: Obj = {
        "apiVersion": RBAC,
        "kind": "RoleBinding",
        "metadata": {**meta, "name": role_name(name), "namespace": namespace},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": role_name(name)},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    return [role, binding]


def empty_secret(*, namespace: str, name: str) -> Obj:
    """The Secret as the operator creates it when absent: no owner (credentials outlive an
    Agent made again, and two Agents may share one), labelled as the runtime labels it."""
    meta = {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "ankka"}}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque"}


def foreign_secret(secret: Obj) -> str | None:
    """Why an existing Secret is not one for MCP credentials (words for the Agent's status),
    so that naming it cannot give a runtime ``update`` on someone else's Secret; None when it
    is (type Opaque, holding nothing but ``credentials.json``). Reads the keys, never a value."""
    name = (secret.get("metadata") or {}).get("name")
    kind = secret.get("type") or "Opaque"
    others = sorted(set(secret.get("data") or {}) - {SECRET_KEY})
    if kind != "Opaque" or others:
        what = f"type {kind}" if kind != "Opaque" else f"keys {', '.join(others[:5])}"
        return (
            f"the Secret {name!r} named by {CREDENTIALS_VARIABLE} is not one of MCP credentials "
            f"({what}; such a Secret is Opaque and holds only {SECRET_KEY}); name another, or "
            "delete it and the operator creates it empty"
        )
    return None
