"""What the chart's and the operator's pod templates give a pod: no service-link variables, no
setting a Service's link variables could shadow, and a models file before any model exists.

Both crash-loops these guard against were found by running the chart's pods on a real node
(``tests/pods``); these checks run without one, on the rendered manifests and the live API.
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest
import yaml

from tests.cluster.conftest import PLATFORM_NS, ROOT, Kubectl, Operator
from tests.cluster.controlplane import ControlPlane
from tests.support.eventually import eventually


def rendered(cp: ControlPlane, *values: str) -> list[dict[str, Any]]:
    """The chart as ``helm template`` renders it, with ``values`` (``--set`` arguments)."""
    out = subprocess.run(
        [
            str(cp.bin / "helm"),
            "template",
            "ankka",
            str(ROOT / "charts" / "ankka"),
            "--namespace",
            PLATFORM_NS,
            "--kube-version",
            "1.37.2",
            *values,
        ],
        env=cp.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def link_variable(service: str) -> re.Pattern[str]:
    """The names Kubernetes' service links derive from a Service's name."""
    prefix = re.escape(service.upper().replace("-", "_"))
    return re.compile(
        rf"^{prefix}_(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT(_\d+_(TCP|UDP|SCTP)\w*)?)$"
    )


def test_every_pod_template_in_the_chart_turns_service_links_off(
    controlplane: ControlPlane,
) -> None:
    deployments = [d for d in rendered(controlplane) if d["kind"] == "Deployment"]
    assert {d["metadata"]["name"] for d in deployments} == {"ankka-operator", "ankka-gateway"}
    for d in deployments:
        assert d["spec"]["template"]["spec"]["enableServiceLinks"] is False, d["metadata"]["name"]


def test_no_setting_the_chart_passes_has_a_service_link_name(controlplane: ControlPlane) -> None:
    docs = rendered(controlplane)
    patterns = [link_variable(d["metadata"]["name"]) for d in docs if d["kind"] == "Service"]
    for d in docs:
        if d["kind"] != "Deployment":
            continue
        for container in d["spec"]["template"]["spec"]["containers"]:
            for env in container.get("env") or []:
                clash = [p.pattern for p in patterns if p.match(env["name"])]
                assert not clash, f"{d['metadata']['name']}: {env['name']} matches {clash}"


def test_the_gateway_waits_for_the_models_configmap_rather_than_an_empty_directory(
    controlplane: ControlPlane,
) -> None:
    (gateway,) = [
        d
        for d in rendered(controlplane)
        if d["kind"] == "Deployment" and d["metadata"]["name"] == "ankka-gateway"
    ]
    volumes = {v["name"]: v for v in gateway["spec"]["template"]["spec"]["volumes"]}
    assert volumes["models"]["configMap"]["name"] == "ankka-models"
    assert volumes["models"]["configMap"].get("optional", False) is False


def test_the_operator_renders_the_models_configmap_at_its_start(
    kubectl: Kubectl, operator: Operator
) -> None:
    configmap = eventually(
        lambda: kubectl.get("configmap", "ankka-models", PLATFORM_NS),
        what="the models ConfigMap the gateway mounts",
    )
    listed = yaml.safe_load(configmap["data"]["models.yaml"])
    assert isinstance(listed, list)
    every = json.loads(kubectl.run("get", "installationmodels", "-A", "-o", "json").stdout)
    names = {m["metadata"]["name"] for m in every["items"]}
    assert {m["name"] for m in listed} == names


def test_helm_install_prints_the_next_commands(helm_release: str) -> None:
    assert "NOTES:" in helm_release
    assert "kubectl -n ankka-system rollout status deployment/ankka-operator" in helm_release
    assert "kubectl explain agent.spec" in helm_release


@pytest.mark.parametrize(
    ("field", "words"),
    [
        ("agent.spec", "the image and module to run"),
        ("agent.spec.models.model", "name at the hosted provider"),
        ("installationmodel.spec.server.args", "The container's arguments"),
        ("task.spec.dependsOn", "must complete first"),
    ],
)
def test_kubectl_explain_documents_the_fields(
    kubectl: Kubectl, helm_release: str, field: str, words: str
) -> None:
    out = kubectl.run("explain", field).stdout
    assert words in out, out
    assert "<no description>" not in out and "<empty>" not in out, out
