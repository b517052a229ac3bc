"""Who may reach what over the network, read back from a real API server: the NetworkPolicy
the operator renders for an Agent (peers and port), the chart's policy for the gateway, the
API server's own check of ``spec.callers``, and the models file's callers against the Agents'
``spec.models``.

The test control plane has no NetworkPolicy enforcer (the pods tier's CNI bridge does not
enforce them either), so these tests check the objects the API server holds, not packets.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import yaml

from ankka.operator.agents import RUNTIME_PORT
from tests.cluster.conftest import PLATFORM_NS, ROOT, Kubectl, Operator, agent_manifest
from tests.cluster.controlplane import ControlPlane
from tests.support.eventually import eventually

NS = "netpol"
NAME_LABEL = "kubernetes.io/metadata.name"


def in_ns(ns: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "namespaceSelector": {"matchLabels": {NAME_LABEL: ns}},
        "podSelector": {"matchLabels": labels},
    }


def agent(name: str, **spec: Any) -> str:
    return agent_manifest(name, NS, "localhost/netpol:1", "netpol.agents", **spec)


def test_an_agents_policy_admits_the_platform_and_its_declared_callers_on_its_port(
    kubectl: Kubectl, operator: Operator
) -> None:
    kubectl.run("create", "namespace", NS, check=False)
    callers = [
        {"agent": "checkout"},
        {"namespace": "web", "podSelector": {"matchLabels": {"app": "storefront"}}},
        {"namespace": "ops"},
    ]
    kubectl.run("apply", "-f", "-", stdin=agent("orders", callers=callers))
    policy = eventually(
        lambda: kubectl.get("networkpolicy", "orders", NS), what="orders' NetworkPolicy"
    )
    (owner,) = policy["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Agent", "orders")
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "agent",
        "app.kubernetes.io/instance": "orders",
    }
    assert spec["policyTypes"] == ["Ingress"]
    (rule,) = spec["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": RUNTIME_PORT}]
    agent_pods = {"app.kubernetes.io/name": "agent", "app.kubernetes.io/instance": "checkout"}
    assert rule["from"] == [
        in_ns(PLATFORM_NS, {"app.kubernetes.io/name": "ankka-gateway"}),
        in_ns(PLATFORM_NS, {"app.kubernetes.io/name": "ankka-operator"}),
        in_ns(NS, agent_pods),
        in_ns("web", {"app": "storefront"}),
        {"namespaceSelector": {"matchLabels": {NAME_LABEL: "ops"}}},
    ]
    # The runtime pods the policy selects carry the labels it selects them by.
    deployment = eventually(
        lambda: kubectl.get("deployment", "orders", NS), what="orders' Deployment"
    )
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert spec["podSelector"]["matchLabels"].items() <= pod_labels.items()


def test_the_api_server_refuses_a_caller_naming_both_an_agent_and_pods(
    kubectl: Kubectl, operator: Operator
) -> None:
    kubectl.run("create", "namespace", NS, check=False)
    both = [{"agent": "checkout", "podSelector": {"matchLabels": {"app": "x"}}}]
    out = kubectl.run("apply", "-f", "-", stdin=agent("both", callers=both), check=False)
    assert out.returncode != 0 and "not both" in out.stderr
    empty = kubectl.run("apply", "-f", "-", stdin=agent("empty", callers=[{}]), check=False)
    assert empty.returncode != 0 and "a podSelector or a namespace" in empty.stderr
    ns_only = agent("ns-only", callers=[{"namespace": "ops"}])
    assert kubectl.run("apply", "--dry-run=server", "-f", "-", stdin=ns_only).returncode == 0


def test_the_chart_lets_only_runtimes_reach_the_gateways_tls_port(
    kubectl: Kubectl, helm_release: str
) -> None:
    policy = kubectl.get("networkpolicy", "ankka-gateway", PLATFORM_NS)
    assert policy is not None
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "ankka-gateway"}
    assert spec["policyTypes"] == ["Ingress"]
    tls, health = spec["ingress"]
    assert tls["ports"] == [{"protocol": "TCP", "port": 8443}]
    assert tls["from"] == [
        {
            "namespaceSelector": {},
            "podSelector": {
                "matchLabels": {
                    "app.kubernetes.io/name": "agent",
                    "app.kubernetes.io/part-of": "ankka",
                }
            },
        }
    ]
    assert health == {"ports": [{"protocol": "TCP", "port": 9090}]}  # probes, Prometheus


def test_a_deployed_model_servers_policy_admits_only_the_gateway_and_the_operator(
    kubectl: Kubectl, operator: Operator
) -> None:
    kubectl.run("create", "namespace", NS, check=False)
    model = {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "InstallationModel",
        "metadata": {"name": "served-here", "namespace": NS},
        "spec": {"model": "qwen3:0.6b", "server": {"kind": "llamacpp", "image": "llama:1"}},
    }
    kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(model))
    policy = eventually(
        lambda: kubectl.get("networkpolicy", "served-here", NS), what="the model server's policy"
    )
    (owner,) = policy["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("InstallationModel", "served-here")
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8080}]
    assert rule["from"] == [
        in_ns(PLATFORM_NS, {"app.kubernetes.io/name": "ankka-gateway"}),
        in_ns(PLATFORM_NS, {"app.kubernetes.io/name": "ankka-operator"}),
    ]
    server = kubectl.get("deployment", "served-here", NS)
    assert server is not None
    labels = server["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()


def test_the_models_files_callers_are_the_agents_naming_each_model(
    kubectl: Kubectl, operator: Operator, controlplane: ControlPlane
) -> None:
    kubectl.run("create", "namespace", NS, check=False)
    model = {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "InstallationModel",
        "metadata": {"name": "tiny", "namespace": NS},
        "spec": {"model": "tiny:1", "endpoint": {"url": "http://127.0.0.1:9", "kind": "ollama"}},
    }
    kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(model))
    uses_tiny = [{"name": "local", "installation": "tiny"}]
    for name in ("reports", "archive"):
        kubectl.run("apply", "-f", "-", stdin=agent(name, models=uses_tiny))

    def listed(kind: str) -> list[dict[str, Any]]:
        out = kubectl.run("get", kind, "-A", "-o", "json").stdout
        items: list[dict[str, Any]] = json.loads(out)["items"]
        return items

    def compare() -> tuple[dict[str, list[str]], dict[str, list[str]]] | None:
        expected: dict[str, set[str]] = {
            m["metadata"]["name"]: set() for m in listed("installationmodels")
        }
        where = {
            m["metadata"]["name"]: m["metadata"]["namespace"] for m in listed("installationmodels")
        }
        for a in listed("agents"):
            ns, name = a["metadata"]["namespace"], a["metadata"]["name"]
            for model in a["spec"].get("models") or []:
                im = model.get("installation")
                if im in expected and where[im] == ns:
                    expected[im].add(f"ankka://service/{ns}/{name}")
        cm = kubectl.get("configmap", "ankka-models", PLATFORM_NS)
        rows = yaml.safe_load(cm["data"]["models.yaml"]) if cm else []
        got = {r["name"]: sorted(r.get("callers", [])) for r in rows or []}
        want = {k: sorted(v) for k, v in expected.items()}
        tiny = [f"ankka://service/{NS}/archive", f"ankka://service/{NS}/reports"]
        return (got, want) if got == want and want.get("tiny") == tiny else None

    assert eventually(compare, what="the models file's callers to match the Agents' spec.models")


def test_the_chart_switches_policies_and_token_review_off(controlplane: ControlPlane) -> None:
    def kinds(*values: str) -> list[tuple[str, str]]:
        out = subprocess.run(
            [
                str(controlplane.bin / "helm"), "template", "ankka", str(ROOT / "charts" / "ankka"),
                "--kube-version", "1.37.2", *(a for v in values for a in ("--set", v)),
            ],
            env=controlplane.env(), capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        docs = [d for d in yaml.safe_load_all(out.stdout) if d]
        operator_env = next(
            c["env"]
            for d in docs
            if d["kind"] == "Deployment" and d["metadata"]["name"] == "ankka-operator"
            for c in d["spec"]["template"]["spec"]["containers"]
        )
        settings = [(e["name"], str(e.get("value"))) for e in operator_env if "value" in e]
        return [(d["kind"], d["metadata"]["name"]) for d in docs] + settings

    on = kinds()
    assert ("NetworkPolicy", "ankka-gateway") in on
    assert ("ClusterRoleBinding", "ankka-runtime-token-review") in on
    assert ("ANKKA_TOKEN_REVIEW_URL", "https://kubernetes.default.svc") in on
    off = kinds("networkPolicies.enabled=false", "tokenReview.enabled=false")
    assert not [k for k in off if k[0] == "NetworkPolicy" or "token-review" in k[1]]
    assert ("ANKKA_OPERATOR_NETWORK_POLICIES", "false") in off
    assert ("ANKKA_TOKEN_REVIEW_URL", "") in off
