"""An Agent's readiness follows the pods, through the Deployment the operator owns.

This tier has no node, and no Deployment controller: the Deployment's status is written here,
as the admin, through its status subresource, the way the Deployment controller writes it.
The operator (with the chart's ServiceAccount, so the chart's RBAC) watches the Deployment and
turns its status into the Agent's ``Available`` and ``Ready`` conditions, which ``kubectl
wait`` reads. The pods tier shows the same with real pods (tests/pods/test_workload.py).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

from tests.cluster.conftest import PLATFORM_NS, Kubectl, Operator
from tests.cluster.controlplane import ControlPlane
from tests.support.eventually import eventually

NS = "ready-lab"


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


def agent(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "image": "registry.example/shop/chat:1",
            "module": "chat",
            "replicas": replicas,
            # Replicas share sessions through PostgreSQL (SQLite would be refused with two).
            "store": {"postgres": {"dsnSecretRef": {"name": "chat-db", "key": "uri"}}},
        },
    }


def agent_when(
    kubectl: Kubectl, name: str, check: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The Agent once ``check`` holds of it; an AssertionError (retried by eventually) until."""
    body = kubectl.get("agent", name, NS)
    assert body is not None and check(body), (body or {}).get("status")
    return body


def write_deployment_status(kubectl: Kubectl, name: str, **status: Any) -> None:
    """Write the Deployment's status as its controller would (the status subresource)."""
    deployment = kubectl.get("deployment", name, NS)
    assert deployment is not None
    body = {"status": {"observedGeneration": deployment["metadata"]["generation"], **status}}
    out = kubectl.run(
        "patch", "deployment", name, "-n", NS, "--subresource=status", "--type=merge",
        "-p", json.dumps(body), check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr


def wait_ready(cp: ControlPlane, name: str, timeout: str) -> subprocess.CompletedProcess[str]:
    return cp.kubectl(
        "wait", "--for=condition=Ready", f"agent/{name}", "-n", NS, f"--timeout={timeout}",
        check=False,
    )  # fmt: skip


def test_ready_waits_for_the_deployments_available_replicas(
    kubectl: Kubectl, operator: Operator, controlplane: ControlPlane
) -> None:
    kubectl.run("create", "namespace", NS)
    kubectl.run("apply", "-f", "-", stdin=json.dumps(agent("chat", 2)))
    rendered = eventually(
        lambda: agent_when(kubectl, "chat", lambda a: bool(condition(a, "Rendered"))),
        what="chat rendered",
    )
    assert rendered["status"]["phase"] == "Progressing"
    assert rendered["status"]["replicasReady"] == "0/2"
    assert condition(rendered, "Ready")["status"] == "False"
    # Nothing is available: kubectl wait times out (it returned at once before, issue 27).
    refused = wait_ready(controlplane, "chat", "3s")
    assert refused.returncode != 0, refused.stdout

    write_deployment_status(
        kubectl, "chat", replicas=2, updatedReplicas=2, readyReplicas=1, availableReplicas=1
    )
    one = eventually(
        lambda: agent_when(kubectl, "chat", lambda a: a["status"].get("replicasReady") == "1/2"),
        what="chat at 1/2",
    )
    assert condition(one, "Ready")["reason"] == "Progressing"
    assert "1 of 2 replica(s) available" in condition(one, "Available")["message"]

    write_deployment_status(
        kubectl, "chat", replicas=2, updatedReplicas=2, readyReplicas=2, availableReplicas=2
    )
    done = wait_ready(controlplane, "chat", "30s")
    assert done.returncode == 0, done.stderr
    ready = kubectl.get("agent", "chat", NS)
    assert ready is not None and ready["status"]["phase"] == "Ready"
    assert condition(ready, "Available")["reason"] == "MinimumReplicasAvailable"
    listed = kubectl.run("get", "agents", "-n", NS).stdout
    header, row = listed.splitlines()[:2]
    assert "REPLICAS" in header and "2/2" in row.split(), listed


def test_a_failing_rollout_makes_the_agent_unready_with_the_deployments_words(
    kubectl: Kubectl, operator: Operator, controlplane: ControlPlane
) -> None:
    kubectl.run("apply", "-f", "-", stdin=json.dumps(agent("refused", 1)))
    eventually(lambda: kubectl.get("deployment", "refused", NS), what="refused's Deployment")
    words = 'pods "refused-1" is forbidden: violates PodSecurity "restricted:latest"'
    write_deployment_status(
        kubectl,
        "refused",
        replicas=0,
        availableReplicas=0,
        conditions=[
            {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": words}
        ],
    )
    unready = eventually(
        lambda: agent_when(
            kubectl, "refused", lambda a: condition(a, "Ready").get("reason") == "ReplicaFailure"
        ),
        what="refused's Ready naming the ReplicaFailure",
    )
    assert words in condition(unready, "Ready")["message"]
    assert unready["status"]["phase"] == "Progressing"


def test_the_chart_gives_the_operator_kopfs_minimum_so_it_starts_without_errors(
    kubectl: Kubectl, operator: Operator, controlplane: ControlPlane
) -> None:
    account = f"system:serviceaccount:{PLATFORM_NS}:ankka-operator"
    for verb, resource in [
        ("list", "customresourcedefinitions.apiextensions.k8s.io"),
        ("watch", "customresourcedefinitions.apiextensions.k8s.io"),
        ("list", "namespaces"),
        ("watch", "deployments.apps"),
    ]:
        out = kubectl.run("auth", "can-i", verb, resource, "--as", account, check=False)
        assert out.stdout.strip() == "yes", (verb, resource, out.stdout, out.stderr)
    # The CRD watch kopf runs to follow the cluster's resources started (at --verbose), and
    # nothing was refused: without the rule kopf logged 9 ERROR lines (its retries of the
    # refused watch, the first within a second) and then a warning. This test runs last in
    # its file, so the operator has been running while the Agents above were reconciled.
    started = "Starting the watch-stream for customresourcedefinitions"
    eventually(
        lambda: started in operator.log.read_text(errors="replace"),
        what="kopf's watch of the CRDs",
    )
    log = operator.log.read_text(errors="replace")
    assert "Not enough permissions" not in log, log[-3000:]
    # kopf logs its retries at ERROR; a refusal (403) was what the missing rules caused. A
    # 429 while the API server initialises a new CRD's storage is retried and is not one.
    refused = [
        line
        for line in log.splitlines()
        if "[ERROR" in line and ("403" in line or "Forbidden" in line or "permission" in line)
    ]
    assert not refused, refused[:3]
