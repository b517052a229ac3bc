"""An Agent's MCP servers on a real kube-apiserver: the runtime container's ANKKA_MCP_* env,
a header from a Secret through valueFrom, and an entry the operator refuses naming it."""

from __future__ import annotations

from typing import Any

import yaml

from tests.cluster.conftest import Kubectl, Operator
from tests.support.eventually import eventually

NS = "mcp-shop"


def apply(kubectl: Kubectl, *docs: dict[str, Any]) -> None:
    kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))


def agent(name: str, servers: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "image": "registry.example/shop:1",
            "module": "examples.shop",
            "mcpServers": servers,
        },
    }


def test_mcp_servers_render_the_runtime_env_with_the_header_from_its_secret(
    kubectl: Kubectl, operator: Operator
) -> None:
    apply(
        kubectl,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "catalog-token", "namespace": NS},
            "stringData": {"bearer": "Bearer not-in-the-deployment"},
        },
        agent(
            "shop",
            [
                {
                    "name": "catalog",
                    "url": "http://catalog.mcp-shop.svc:8000/mcp",
                    "headers": [
                        {
                            "name": "Authorization",
                            "secretKeyRef": {"name": "catalog-token", "key": "bearer"},
                        }
                    ],
                }
            ],
        ),
    )
    deployment = eventually(lambda: kubectl.get("deployment", "shop", NS), what="shop's Deployment")
    (runtime,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in runtime["env"]}
    assert env["ANKKA_MCP_CATALOG_URL"]["value"] == "http://catalog.mcp-shop.svc:8000/mcp"
    assert env["ANKKA_MCP_CATALOG_HEADER_AUTHORIZATION"]["valueFrom"] == {
        "secretKeyRef": {"name": "catalog-token", "key": "bearer"}
    }
    assert "not-in-the-deployment" not in yaml.safe_dump(deployment)


def test_an_approval_requiring_server_is_rendered_for_the_runtime(
    kubectl: Kubectl, operator: Operator
) -> None:
    apply(
        kubectl,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        agent(
            "careful",
            [{"name": "catalog", "url": "http://c/mcp", "requiresApproval": {"all": True}}],
        ),
    )
    deployment = eventually(
        lambda: kubectl.get("deployment", "careful", NS), what="careful's Deployment"
    )
    env = {
        e["name"]: e.get("value")
        for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["ANKKA_MCP_CATALOG_REQUIRES_APPROVAL"] == "all"


def test_a_header_without_its_secret_reference_is_refused_by_the_schema(
    kubectl: Kubectl, operator: Operator
) -> None:
    body = agent("bare", [{"name": "catalog", "url": "http://c/mcp", "headers": [{"name": "X"}]}])
    out = kubectl.run("apply", "-f", "-", check=False, stdin=yaml.safe_dump(body))
    assert out.returncode != 0
    assert "secretKeyRef" in out.stderr, out.stderr
