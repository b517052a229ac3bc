"""An InstallationModel whose server container keeps dying gets ``ServerRunning=False`` naming
the signal, read by the operator (with the chart's RBAC only) from the pods of its Deployment.

This tier has a real kube-apiserver but no kubelet, so the pod and its status are written by
hand, as a kubelet writes them for a llama-server that dies of SIGILL at every start on a node
whose CPU reports AMX its kernel refuses (exit code 132 from the image's entrypoint, the
entrypoint's report as the termination message, CrashLoopBackOff). What is proved is the
operator's side: it finds the pods by the Deployment's labels, is allowed to list them, and
names the signal; the entrypoint's side is tests/unit/local/test_llama_image_entrypoint.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ankka.operator.objects import labels_for
from tests.cluster.conftest import Kubectl, Operator
from tests.support.eventually import eventually

NS = "dying"
MODEL = "crashy"
LAST_WORDS = (
    "llama-server did not start in any of the 2 ways ankka tries:\n"
    "1. as built: it died of illegal instruction (SIGILL) before it was ready\n"
    "2. with --no-repack: it died of illegal instruction (SIGILL) before it was ready"
)


def _condition(kubectl: Kubectl, kind: str) -> dict[str, Any]:
    model = kubectl.get("installationmodel", MODEL, NS) or {}
    for c in (model.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


@pytest.fixture(scope="module")
def crashing_model(kubectl: Kubectl, operator: Operator) -> dict[str, str]:
    kubectl.run("create", "namespace", NS)
    model = {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "InstallationModel",
        "metadata": {"name": MODEL, "namespace": NS},
        "spec": {
            "model": "smollm2",
            "server": {"kind": "llamacpp", "image": "localhost/ankka/llama-server:0.1.0"},
        },
    }
    kubectl.run("apply", "-f", "-", stdin=json.dumps(model))
    eventually(
        lambda: kubectl.get("deployment", MODEL, NS),
        what="the operator to render the model's Deployment",
    )
    deployment = kubectl.get("deployment", MODEL, NS)
    assert deployment is not None
    labels: dict[str, str] = deployment["spec"]["selector"]["matchLabels"]
    assert labels == labels_for("model-server", MODEL)
    return labels


def _pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"containers": [{"name": "server", "image": "localhost/ankka/llama-server:0.1.0"}]},
    }


def _dying_status(restarts: int) -> dict[str, Any]:
    """What a kubelet writes for a container that died of SIGILL ``restarts`` times."""
    return {
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "server",
                    "image": "localhost/ankka/llama-server:0.1.0",
                    "imageID": "",
                    "ready": False,
                    "restartCount": restarts,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                    "lastState": {
                        "terminated": {
                            "exitCode": 132,
                            "reason": "Error",
                            "message": LAST_WORDS,
                            "startedAt": "2026-12-01T22:00:00Z",
                            "finishedAt": "2026-12-01T22:00:01Z",
                        }
                    },
                }
            ],
        }
    }


def test_a_model_whose_server_keeps_dying_names_the_signal(
    kubectl: Kubectl, crashing_model: dict[str, str]
) -> None:
    name = f"{MODEL}-5c9f7d-abcde"
    kubectl.run("apply", "-f", "-", stdin=json.dumps(_pod(name, crashing_model)))
    # A pod of another Deployment in the namespace, dying too, must not be blamed.
    other = _pod("bystander", labels_for("model-server", "other"))
    kubectl.run("apply", "-f", "-", stdin=json.dumps(other))
    for pod, restarts in ((name, 4), ("bystander", 9)):
        kubectl.run(
            "patch", "pod", pod, "-n", NS, "--subresource=status", "--type=merge",
            "-p", json.dumps(_dying_status(restarts)),
        )  # fmt: skip
    running = eventually(
        lambda: _condition(kubectl, "ServerRunning"),
        what="the model's ServerRunning condition",
        timeout=60,
    )
    assert running["status"] == "False"
    assert running["reason"] == "CrashLoopBackOff"
    assert running["message"].startswith(
        f"pod {name}: the server container died of illegal instruction (SIGILL) (exit code 132), "
        "restarted 4 times, now CrashLoopBackOff; its last words: "
    )
    assert "2. with --no-repack: it died of illegal instruction (SIGILL)" in running["message"]
    assert _condition(kubectl, "Served")["status"] == "False"
