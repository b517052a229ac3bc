"""The Role an Agent's runtime gets for MCP credentials in a Secret, against the real API server.

An Agent with ``ANKKA_MCP_CREDENTIALS=secret:NAME`` in its env gets ``<agent>-mcp-credentials``,
a Role granting ``get`` and ``update`` on that one Secret, bound to its ServiceAccount, and the
Secret itself (empty) when absent; the Role follows the spec and goes when no Secret is named.
The operator runs with the chart's ServiceAccount token, so the chart lets it grant this.
Access is judged by the API server (``kubectl auth can-i --as``) and by the runtime's own
store writing and reading with a token of the Agent's ServiceAccount.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from mcp.shared.auth import OAuthToken

from ankka.runtime.features.mcp.credentials import IssuerStorage, SecretStore
from tests.cluster.conftest import Kubectl, Operator, agent_manifest
from tests.cluster.controlplane import ControlPlane
from tests.support.eventually import eventually

NS = "mcp-grant"
ROLE = "shop-mcp-credentials"
ACCOUNT = f"system:serviceaccount:{NS}:shop"


def _apply_shop(kubectl: Kubectl, env: list[dict[str, Any]]) -> None:
    manifest = agent_manifest("shop", NS, "registry.example/shop:1", "shop", env=env)
    kubectl.run("apply", "-f", "-", stdin=manifest)


def _credentials(secret: str) -> list[dict[str, Any]]:
    return [{"name": "ANKKA_MCP_CREDENTIALS", "value": f"secret:{secret}"}]


def _can(kubectl: Kubectl, verb: str, what: str) -> str:
    out = kubectl.run("auth", "can-i", verb, what, "-n", NS, "--as", ACCOUNT, check=False)
    return out.stdout.strip()


def _role_names(kubectl: Kubectl) -> list[str]:
    role = kubectl.get("role", ROLE, NS)
    assert role is not None, "no Role yet"
    (rule,) = role["rules"]
    names: list[str] = rule["resourceNames"]
    return names


def _gone(kubectl: Kubectl) -> bool | None:
    role, binding = kubectl.get("role", ROLE, NS), kubectl.get("rolebinding", ROLE, NS)
    return (role is None and binding is None) or None


def test_an_agent_keeping_credentials_in_a_secret_may_get_and_update_that_secret_only(
    kubectl: Kubectl, operator: Operator, controlplane: ControlPlane, tmp_path: Path
) -> None:
    kubectl.run("create", "namespace", NS, check=False)
    _apply_shop(kubectl, _credentials("shop-mcp"))
    eventually(lambda: kubectl.get("rolebinding", ROLE, NS), what="the RoleBinding")
    role = kubectl.get("role", ROLE, NS)
    binding = kubectl.get("rolebinding", ROLE, NS)
    assert role is not None and binding is not None
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["shop-mcp"],
            "verbs": ["get", "update"],
        }
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": ROLE,
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "shop", "namespace": NS}]
    agent = kubectl.get("agent", "shop", NS)
    assert agent is not None
    for child in (role, binding):
        (owner,) = child["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("Agent", agent["metadata"]["uid"])
    # The operator created the Secret, empty and ownerless, so the runtime needs no create.
    secret = kubectl.get("secret", "shop-mcp", NS)
    assert secret is not None and not secret.get("data")
    assert "ownerReferences" not in secret["metadata"]
    assert _can(kubectl, "get", "secret/shop-mcp") == "yes"
    assert _can(kubectl, "update", "secret/shop-mcp") == "yes"
    assert _can(kubectl, "get", "secret/shop-tls") == "no"
    assert _can(kubectl, "create", "secrets") == "no"
    assert _can(kubectl, "list", "secrets") == "no"

    # The runtime's store, with the Agent's own token: a write and a read back.
    account = tmp_path / "account"
    account.mkdir()
    token = kubectl.run("create", "token", "shop", "-n", NS).stdout.strip()
    (account / "token").write_text(token)
    (account / "namespace").write_text(NS)
    (account / "ca.crt").write_bytes((controlplane.workdir / "pki" / "ca.crt").read_bytes())

    def storage() -> IssuerStorage:
        store = SecretStore("shop-mcp", api=controlplane.server, account_dir=account)
        resource = "https://catalog.example/mcp"
        return IssuerStorage(store, resource, lambda: "https://auth.example/", lock=asyncio.Lock())

    async def write_then_read() -> str | None:
        await storage().set_tokens(OAuthToken(access_token="at-shop", expires_in=600))
        tokens = await storage().get_tokens()
        return tokens.access_token if tokens else None

    assert asyncio.run(write_then_read()) == "at-shop"


def test_the_role_follows_the_spec_and_goes_when_no_secret_is_named(
    kubectl: Kubectl, operator: Operator
) -> None:
    kubectl.run("create", "namespace", NS, check=False)
    _apply_shop(kubectl, _credentials("shop-mcp"))
    eventually(lambda: _role_names(kubectl) == ["shop-mcp"] or None, what="the first Role")
    _apply_shop(kubectl, _credentials("shop-mcp-2"))
    eventually(lambda: _role_names(kubectl) == ["shop-mcp-2"] or None, what="the Role renamed")
    assert _can(kubectl, "get", "secret/shop-mcp-2") == "yes"
    assert _can(kubectl, "get", "secret/shop-mcp") == "no"

    _apply_shop(kubectl, [{"name": "ANKKA_MCP_CREDENTIALS", "value": "file:/data/mcp.json"}])

    eventually(lambda: _gone(kubectl), what="the Role and RoleBinding deleted")
    assert _can(kubectl, "get", "secret/shop-mcp-2") == "no"
    # The credentials themselves stay: they are no Agent's to delete.
    assert kubectl.get("secret", "shop-mcp-2", NS) is not None


def test_deleting_the_agent_deletes_its_role(kubectl: Kubectl, operator: Operator) -> None:
    kubectl.run("create", "namespace", NS, check=False)
    _apply_shop(kubectl, _credentials("shop-mcp"))
    eventually(lambda: kubectl.get("rolebinding", ROLE, NS), what="the RoleBinding")
    kubectl.run("delete", "agent", "shop", "-n", NS)
    eventually(
        lambda: _gone(kubectl),
        what="the garbage collector deleting the Role and RoleBinding",
        timeout=60,
    )


def test_a_secret_holding_something_else_is_not_granted(
    kubectl: Kubectl, operator: Operator
) -> None:
    kubectl.run("create", "namespace", NS, check=False)
    kubectl.run(
        "create", "secret", "generic", "payments", "-n", NS, "--from-literal=password=hunter2"
    )
    manifest = agent_manifest(
        "till", NS, "registry.example/till:1", "till", env=_credentials("payments")
    )
    kubectl.run("apply", "-f", "-", stdin=manifest)

    def refused() -> dict[str, Any] | None:
        agent = kubectl.get("agent", "till", NS) or {}
        for condition in (agent.get("status") or {}).get("conditions") or []:
            if condition["type"] == "Rendered" and condition["status"] == "False":
                return dict(condition)
        return None

    condition = eventually(refused, what="till refused")
    assert condition["reason"] == "McpCredentialsSecretTaken", condition
    assert "'payments'" in condition["message"] and "password" in condition["message"]
    assert "hunter2" not in json.dumps(kubectl.get("agent", "till", NS))
    assert kubectl.get("role", "till-mcp-credentials", NS) is None
    assert _can_as(kubectl, "till", "update", "secret/payments") == "no"


def _can_as(kubectl: Kubectl, account: str, verb: str, what: str) -> str:
    who = f"system:serviceaccount:{NS}:{account}"
    out = kubectl.run("auth", "can-i", verb, what, "-n", NS, "--as", who, check=False)
    return out.stdout.strip()
