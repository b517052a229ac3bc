"""Every pod the chart and the operator render passes PodSecurity "restricted", checked by the
real API server's PodSecurity admission (tests/cluster/controlplane.py turns it on), and the
pod template overlay reaches the Deployments the API server stores.

This tier runs no pods, so each rendered Deployment's pod template is created as a Pod with a
server-side dry run in a namespace labelled ``pod-security.kubernetes.io/enforce=restricted``:
the API server admits or refuses it exactly as it would the ReplicaSet's pod, and stores nothing.
The pods tier runs an Agent in such a namespace for real (tests/pods/test_workload.py).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

from tests.cluster.conftest import PLATFORM_NS, Kubectl, Operator
from tests.support.eventually import eventually

NS = "locked"


@pytest.fixture(scope="module")
def locked(kubectl: Kubectl, operator: Operator) -> str:
    kubectl.run("create", "namespace", NS)
    kubectl.run("label", "namespace", NS, "pod-security.kubernetes.io/enforce=restricted")
    return NS


def as_pod(template: dict[str, Any], name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    }


def admitted(kubectl: Kubectl, pod: dict[str, Any]) -> tuple[bool, str]:
    out = kubectl.run(
        "create", "--dry-run=server", "-f", "-", "-o", "name", check=False, stdin=json.dumps(pod)
    )
    return out.returncode == 0, out.stderr


def rendered(kubectl: Kubectl, name: str) -> dict[str, Any]:
    deployment = kubectl.get("deployment", name, NS)
    assert deployment is not None, f"no Deployment {NS}/{name} yet"
    return deployment


def test_the_api_server_enforces_restricted_in_the_namespace(locked: str, kubectl: Kubectl) -> None:
    bare = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare", "namespace": NS},
        "spec": {"containers": [{"name": "c", "image": "registry.example/x:1"}]},
    }
    ok, words = admitted(kubectl, bare)
    assert not ok and 'violates PodSecurity "restricted' in words, words


@pytest.mark.parametrize("name", ["ankka-operator", "ankka-gateway"])
def test_the_charts_pods_are_restricted(locked: str, kubectl: Kubectl, name: str) -> None:
    deployment = kubectl.get("deployment", name, PLATFORM_NS)
    assert deployment is not None
    ok, words = admitted(kubectl, as_pod(deployment["spec"]["template"], name))
    assert ok, words


def test_the_operators_pods_are_restricted_and_carry_the_overlay(
    locked: str, kubectl: Kubectl
) -> None:
    kubectl.run("create", "secret", "generic", "shop-token", "-n", NS, "--from-literal=token=t0")
    agent = {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": "cart", "namespace": NS},
        "spec": {
            "image": "registry.example/shop/cart:1",
            "module": "shop.cart",
            "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "512Mi"}},
            "env": [
                {
                    "name": "SHOP_TOKEN",
                    "valueFrom": {"secretKeyRef": {"name": "shop-token", "key": "token"}},
                }
            ],
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "agents"}],
            "imagePullSecrets": [{"name": "registry"}],
        },
    }
    model = {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "InstallationModel",
        "metadata": {"name": "qwen", "namespace": NS},
        "spec": {
            "model": "qwen3:0.6b",
            "server": {
                "kind": "ollama",
                "image": "ollama/ollama:0.9",
                "resources": {"limits": {"nvidia.com/gpu": 1}},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "securityContext": {"runAsUser": 1000},
            },
        },
    }
    for doc in (agent, model):
        kubectl.run("apply", "-f", "-", stdin=json.dumps(doc))
    for name in ("cart", "qwen"):
        deployment = eventually(
            functools.partial(rendered, kubectl, name), what=f"{name}'s Deployment"
        )
        ok, words = admitted(kubectl, as_pod(deployment["spec"]["template"], name))
        assert ok, (name, words)
    stored = kubectl.get("deployment", "qwen", NS)
    assert stored is not None
    (server,) = stored["spec"]["template"]["spec"]["containers"]
    # The integer GPU quantity went through the CRD and into the Deployment the API server took.
    assert server["resources"]["limits"]["nvidia.com/gpu"] in (1, "1")
    cart = kubectl.get("deployment", "cart", NS)
    assert cart is not None
    pod = cart["spec"]["template"]["spec"]
    (runtime,) = pod["containers"]
    token = next(e for e in runtime["env"] if e["name"] == "SHOP_TOKEN")
    assert token == {
        "name": "SHOP_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "shop-token", "key": "token"}},
    }
    assert "t0" not in json.dumps(cart)  # the value stays in the Secret
    assert runtime["resources"] == {"requests": {"cpu": "100m"}, "limits": {"memory": "512Mi"}}
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "agents"}]
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
