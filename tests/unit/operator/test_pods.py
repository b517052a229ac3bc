"""The pod template overlay on Agent and InstallationModel: what it adds to the rendered pods,
what it can never remove, and the restricted securityContext every rendered pod carries."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ankka.api.resources import AgentSpec, InstallationModelSpec
from ankka.operator.agents import agent_children, overlay_conflict
from ankka.operator.models import server_children
from ankka.operator.settings import Settings

SETTINGS = Settings(namespace="platform")
OVERLAY: dict[str, Any] = {
    "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"nvidia.com/gpu": 1}},
    "env": [
        {"name": "SHOP_MODE", "value": "live"},
        {"name": "SHOP_TOKEN", "valueFrom": {"secretKeyRef": {"name": "shop", "key": "token"}}},
        {"name": "SHOP_REGION", "valueFrom": {"configMapKeyRef": {"name": "shop", "key": "r"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ],
    "envFrom": [{"secretRef": {"name": "shop-env"}, "prefix": "SHOP_"}],
    "imagePullSecrets": [{"name": "registry"}],
    "nodeSelector": {"pool": "gpu"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    },
    "priorityClassName": "agents-high",
    "serviceAccountAnnotations": {"iam.example.com/role": "shop"},
    "podAnnotations": {"prometheus.io/scrape": "true"},
    "podLabels": {"team": "shop"},
}


def agent(**extra: Any) -> AgentSpec:
    return AgentSpec.model_validate({"image": "i", "module": "shop.agents", **extra})


def rendered(spec: AgentSpec) -> dict[str, Any]:
    children = agent_children(
        namespace="shop", name="cart", uid="u1", spec=spec, settings=SETTINGS, held=False
    )
    return {
        c["kind"] if c["kind"] != "ServiceAccount" else c["metadata"]["name"]: c for c in children
    }


def test_the_overlay_reaches_the_runtimes_pod_and_its_service_account() -> None:
    kinds = rendered(agent(**OVERLAY))
    template = kinds["Deployment"]["spec"]["template"]
    pod = template["spec"]
    (container,) = pod["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "250m", "memory": "256Mi"},
        "limits": {"nvidia.com/gpu": 1},  # an integer, as a Pod takes it
    }
    names = [e["name"] for e in container["env"]]
    assert len(names) == len(set(names)), names  # the API server refuses a name twice
    env = {e["name"]: e for e in container["env"]}
    assert env["SHOP_MODE"] == {"name": "SHOP_MODE", "value": "live"}
    assert env["SHOP_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "shop", "key": "token"}}
    assert env["SHOP_REGION"]["valueFrom"] == {"configMapKeyRef": {"name": "shop", "key": "r"}}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert container["envFrom"] == [{"prefix": "SHOP_", "secretRef": {"name": "shop-env"}}]
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["nodeSelector"] == {"pool": "gpu"}
    assert pod["tolerations"] == OVERLAY["tolerations"]
    assert pod["affinity"] == OVERLAY["affinity"]
    assert pod["priorityClassName"] == "agents-high"
    assert template["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert template["metadata"]["labels"]["team"] == "shop"
    sa = kinds["cart"]["metadata"]
    assert sa["annotations"] == {"iam.example.com/role": "shop"}


def test_the_overlay_never_drops_the_certificate_the_identity_or_the_command() -> None:
    plain = rendered(agent())["Deployment"]["spec"]["template"]["spec"]
    overlaid = rendered(agent(**OVERLAY))["Deployment"]["spec"]["template"]["spec"]
    for key in ("volumes", "serviceAccountName", "enableServiceLinks", "securityContext"):
        assert overlaid[key] == plain[key], key
    (before,) = plain["containers"]
    (after,) = overlaid["containers"]
    for key in ("args", "ports", "volumeMounts", "readinessProbe", "securityContext", "image"):
        assert after[key] == before[key], key
    assert {"name": "tls", "secret": {"secretName": "cart-tls"}} in overlaid["volumes"]
    labels = rendered(agent(**OVERLAY))["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/instance"] == "cart"


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"env": [{"name": "ANKKA_TLS_DIR", "value": "/tmp"}]}, "spec.env[0].name: ANKKA_TLS_DIR"),
        ({"env": [{"name": "ANKKA_MODULE", "value": "x"}]}, "ANKKA_MODULE is set by the operator"),
        (
            {"podLabels": {"app.kubernetes.io/instance": "other"}},
            "spec.podLabels: app.kubernetes.io/instance is the operator's",
        ),
    ],
)
def test_an_overlay_naming_what_the_operator_owns_is_refused_naming_the_field(
    extra: dict[str, Any], words: str
) -> None:
    reason = overlay_conflict(agent(**extra), SETTINGS, namespace="shop", name="cart")
    assert reason is not None and words in reason


@pytest.mark.parametrize(
    "bad",
    [
        {"resources": {"limits": {"memory": "lots"}}},
        {"resources": {"limits": {"nvidia.com/gpu": -1}}},
        {"resources": {"limits": {"nvidia.com/gpu": True}}},
        {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "Bad_Name", "key": "k"}}}]},
        {"tolerations": [{"operator": "Sometimes"}]},
        {"securityContext": {"runAsUser": 0}},
        {"podLabels": {"not a key": "x"}},
    ],
)
def test_bad_pod_settings_are_refused_by_the_schema(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        agent(**bad)


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """PodSecurity "restricted" (v1.30+ rules that a rendering can break), checked on a pod
    spec; the cluster tier has the API server check the same pods for real."""
    found: list[str] = []
    context = pod.get("securityContext") or {}
    if (context.get("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
        found.append("pod seccompProfile")
    if context.get("runAsUser") == 0:
        found.append("runAsUser 0")
    for c in pod["containers"]:
        sc = c.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(f"{c['name']}: allowPrivilegeEscalation")
        if (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
            found.append(f"{c['name']}: capabilities")
        if not (sc.get("runAsNonRoot") or context.get("runAsNonRoot")):
            found.append(f"{c['name']}: runAsNonRoot")
        if sc.get("privileged"):
            found.append(f"{c['name']}: privileged")
    for v in pod.get("volumes") or []:
        if "hostPath" in v:
            found.append("hostPath volume")
    return found


@pytest.mark.parametrize("extra", [{}, OVERLAY])
def test_every_rendered_pod_is_restricted(extra: dict[str, Any]) -> None:
    runtime = rendered(agent(**extra))["Deployment"]["spec"]["template"]["spec"]
    assert restricted_violations(runtime) == []
    assert runtime["securityContext"]["runAsUser"] == 10001
    assert runtime["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    server = InstallationModelSpec.model_validate(
        {"model": "m", "server": {"kind": "llamacpp", "image": "llama", **extra}}
    )
    (deployment, *_) = server_children("models", "m", "u", server, SETTINGS)
    model_pod = deployment["spec"]["template"]["spec"]
    assert restricted_violations(model_pod) == []
    assert model_pod["automountServiceAccountToken"] is False


def test_a_model_servers_user_and_root_filesystem_come_from_its_overlay() -> None:
    server = InstallationModelSpec.model_validate(
        {
            "model": "qwen3",
            "server": {
                "kind": "ollama",
                "image": "ollama/ollama",
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
                "resources": {"limits": {"nvidia.com/gpu": 2}},
                "securityContext": {"runAsUser": 1000, "fsGroup": 1000},
                "env": [{"name": "OLLAMA_MODELS", "value": "/models"}],
            },
        }
    )
    (deployment, *_) = server_children("models", "qwen3", "u", server, SETTINGS)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 1000 and pod["securityContext"]["fsGroup"] == 1000
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    (container,) = pod["containers"]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    assert container["securityContext"]["readOnlyRootFilesystem"] is False
    assert [e["name"] for e in container["env"]] == ["OLLAMA_HOST", "OLLAMA_MODELS"]
