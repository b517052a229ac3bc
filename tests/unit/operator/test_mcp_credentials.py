"""The Role of an Agent's MCP credentials Secret: rendered only when one is named, exactly its
verbs on exactly its Secret, bound to the Agent's ServiceAccount, owned by the Agent."""

from __future__ import annotations

from typing import Any

from ankka.api.resources import AgentSpec
from ankka.operator.agents import agent_children
from ankka.operator.mcp_credentials import (
    CREDENTIALS_VARIABLE,
    credentials_rbac,
    credentials_secret,
    empty_secret,
    foreign_secret,
    invalid_credentials,
)
from ankka.operator.settings import Settings

SETTINGS = Settings(namespace="platform")
FROM_CONFIGMAP = {"name": "settings", "key": "credentials"}
OWNED = frozenset({"shop-tls", "shop-store"})


def spec(*env: dict[str, Any]) -> AgentSpec:
    return AgentSpec.model_validate(
        {"image": "registry.example/shop:1", "module": "shop.agents", "env": list(env)}
    )


def credentials(value: str) -> dict[str, Any]:
    return {"name": "ANKKA_MCP_CREDENTIALS", "value": value}


def kinds(children: list[dict[str, Any]]) -> list[str]:
    return [c["kind"] for c in children]


def test_a_secret_named_by_the_agent_gets_get_and_update_on_that_secret_only() -> None:
    role, binding = credentials_rbac(
        spec(credentials("secret:shop-mcp")), namespace="lab", name="shop", meta={"labels": {}}
    )
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "lab"
    assert role["metadata"]["name"] == "shop-mcp-credentials"
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["shop-mcp"],
            "verbs": ["get", "update"],
        }
    ]
    assert binding["kind"] == "RoleBinding"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "shop-mcp-credentials",
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "shop", "namespace": "lab"}]


def test_no_role_without_a_secret() -> None:
    for s in (
        spec(),
        spec(credentials("file:/data/mcp.json")),
        spec({"name": CREDENTIALS_VARIABLE, "valueFrom": {"configMapKeyRef": FROM_CONFIGMAP}}),
        spec(credentials("secret:one"), credentials("file:/data/mcp.json")),  # the last counts
    ):
        assert credentials_secret(s) is None
        assert credentials_rbac(s, namespace="lab", name="shop", meta={}) == []


def test_the_agents_children_carry_the_role_owned_by_the_agent_before_the_deployment() -> None:
    children = agent_children(
        namespace="lab",
        name="shop",
        uid="u-1",
        spec=spec(credentials("secret:shop-mcp")),
        settings=SETTINGS,
        held=False,
    )
    names = kinds(children)
    assert names.index("Role") < names.index("RoleBinding") < names.index("Deployment")
    for child in children:
        if child["kind"] in ("Role", "RoleBinding"):
            (owner,) = child["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["uid"]) == ("Agent", "shop", "u-1")
    plain = agent_children(
        namespace="lab", name="shop", uid="u-1", spec=spec(), settings=SETTINGS, held=False
    )
    assert "Role" not in kinds(plain) and "RoleBinding" not in kinds(plain)


def test_a_name_that_is_no_secret_or_the_operators_own_is_refused_naming_the_field() -> None:
    bad = invalid_credentials(
        spec({"name": "X", "value": "1"}, credentials("secret:Shop_MCP")), agent="shop", owned=OWNED
    )
    assert bad is not None and bad.startswith("spec.env[1].value:") and "'Shop_MCP'" in bad
    own = invalid_credentials(spec(credentials("secret:shop-tls")), agent="shop", owned=OWNED)
    assert own is not None and "'shop-tls'" in own and "operator's" in own
    fine = invalid_credentials(spec(credentials("secret:shop-mcp")), agent="shop", owned=OWNED)
    assert fine is None


def test_only_an_opaque_secret_of_credentials_alone_may_be_granted() -> None:
    made = empty_secret(namespace="lab", name="shop-mcp")
    assert "data" not in made and "ownerReferences" not in made["metadata"]
    assert foreign_secret(made) is None
    kept = {**made, "data": {"credentials.json": "e30="}}
    assert foreign_secret(kept) is None
    other = foreign_secret({**made, "data": {"password": "aHVudGVyMg==", "credentials.json": ""}})
    assert other is not None and "password" in other and "aHVudGVyMg" not in other
    tls = foreign_secret({**made, "type": "kubernetes.io/tls"})
    assert tls is not None and "kubernetes.io/tls" in tls
