"""Who may delegate to whom, rendered by the operator from Agents' ``spec.delegatesTo`` and read
back from a real API server: the delegating runtime's ANKKA_PEERS, the named runtime's
ANKKA_DELEGATORS and NetworkPolicy, both rendered again when ``delegatesTo`` changes; and the
Task CRD's PARENT column."""

from __future__ import annotations

import json
from typing import Any

from tests.cluster.conftest import PLATFORM_NS, Kubectl, Operator, agent_manifest
from tests.support.eventually import eventually

NS = "delegation"


def agent(name: str, **spec: Any) -> str:
    return agent_manifest(name, NS, "localhost/team:1", "team.agents", **spec)


def env_of(kubectl: Kubectl, name: str) -> dict[str, str]:
    deployment = kubectl.get("deployment", name, NS)
    if deployment is None:
        return {}
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def ingress_instances(kubectl: Kubectl, name: str) -> list[str]:
    policy = kubectl.get("networkpolicy", name, NS) or {"spec": {"ingress": [{"from": []}]}}
    peers = policy["spec"]["ingress"][0]["from"]
    return [
        p["podSelector"]["matchLabels"].get("app.kubernetes.io/instance", "")
        for p in peers
        if p.get("namespaceSelector", {}).get("matchLabels", {}).get("kubernetes.io/metadata.name")
        not in (PLATFORM_NS,)
    ]


def test_delegates_to_renders_who_may_call_whom_on_both_sides(
    kubectl: Kubectl, operator: Operator
) -> None:
    kubectl.run("create", "namespace", NS, check=False)
    kubectl.run("apply", "-f", "-", stdin=agent("research"))
    targets = [{"agent": "research", "serves": ["researcher"]}]
    kubectl.run("apply", "-f", "-", stdin=agent("lead", delegatesTo=targets))
    eventually(
        lambda: env_of(kubectl, "research").get("ANKKA_DELEGATORS") == f"{NS}/lead",
        what="research's delegators",
    )
    peers = json.loads(env_of(kubectl, "lead")["ANKKA_PEERS"])
    assert peers == {
        "researcher": {
            "url": f"https://research.{NS}.svc:443",
            "identity": f"ankka://service/{NS}/research",
        }
    }
    assert eventually(
        lambda: ingress_instances(kubectl, "research"), what="lead's pods let in"
    ) == ["lead"]
    # The lead no longer delegates: the researcher's runtime no longer lets it.
    kubectl.run("apply", "-f", "-", stdin=agent("lead"))
    eventually(
        lambda: (
            "ANKKA_DELEGATORS" not in env_of(kubectl, "research")
            and ingress_instances(kubectl, "research") == []
        ),
        what="research's delegators gone",
    )
    assert "ANKKA_PEERS" not in env_of(kubectl, "lead")


def test_kubectl_get_tasks_has_a_parent_column(kubectl: Kubectl, operator: Operator) -> None:
    crd = kubectl.get("crd", "tasks.ankka.dev", "default")
    assert crd is not None
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    assert {"name": "Parent", "type": "string", "jsonPath": ".status.parent"} in columns
