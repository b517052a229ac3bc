"""Pure: an Agent's session policy as the runtime's ``--access-file``, and ``ankka approve``'s
delegate, the ``<agent>-approver`` ServiceAccount.

The file is ``spec.access`` (``service`` and ``agents``, replacing entry by entry what the
module declares) plus ``approvers``: the delegate, which may decide every session's approvals.
A person decides through it: ``ankka approve`` asks the API server for a token of
``<agent>-approver`` for the Agent's audience (TokenRequest), so who may decide is who RBAC
lets ``create`` ``serviceaccounts/token`` on it, checked by the API server, and the runtime
records the person the command names with the delegate (docs/operator.md, Approvals).

Rendered as a ConfigMap ``<agent>-access`` mounted at :data:`ACCESS_DIR`; the pod template
carries the file's digest, so a changed policy rolls the pods (the runtime reads it at start).
Called by ``ankka.operator.agents``; tested in ``tests/unit/operator/test_access.py``.
"""

from __future__ import annotations

import hashlib
from typing import Any

import yaml

from ankka.api.resources import AgentSpec
from ankka.operator.objects import Obj

__all__ = [
    "ACCESS_DIR",
    "ACCESS_FILE",
    "APPROVER_HEADER",
    "DIGEST_ANNOTATION",
    "access_configmap",
    "access_file",
    "approver_account",
    "approver_name",
    "approver_username",
]

ACCESS_DIR = "/etc/ankka/access"
ACCESS_FILE = f"{ACCESS_DIR}/access.yaml"
DIGEST_ANNOTATION = "ankka.dev/access-digest"
# ankka approve sends the person's name in it; the runtime records it with the delegate.
APPROVER_HEADER = "X-Ankka-Approver"


def approver_name(agent: str) -> str:
    return f"{agent}-approver"


def approver_username(namespace: str, agent: str) -> str:
    return f"system:serviceaccount:{namespace}:{approver_name(agent)}"


def access_file(spec: AgentSpec, *, namespace: str, name: str) -> str:
    """The runtime's access file (YAML), stable byte for byte for one spec."""
    data: dict[str, Any] = {}
    if spec.access is not None:
        if spec.access.service is not None:
            data["service"] = spec.access.service.model_dump()
        if spec.access.agents:
            data["agents"] = {n: r.model_dump() for n, r in sorted(spec.access.agents.items())}
    data["approvers"] = [approver_username(namespace, name)]
    return yaml.safe_dump(data, sort_keys=True)


def access_configmap(
    spec: AgentSpec, *, namespace: str, name: str, meta: dict[str, Any]
) -> tuple[Obj, str]:
    """The ConfigMap holding the file, and the file's digest for the pod template."""
    text = access_file(spec, namespace=namespace, name=name)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    configmap: Obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {**meta, "name": f"{name}-access"},
        "data": {"access.yaml": text},
    }
    return configmap, digest


def approver_account(*, meta: dict[str, Any], name: str) -> Obj:
    """The delegate ServiceAccount: no pod runs as it, so no token is ever mounted for it."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {**meta, "name": approver_name(name)},
        "automountServiceAccountToken": False,
    }
