"""``ankka approve`` against a runtime as a pod serves it: mTLS or reviewed service-account
tokens only, with the session policy the operator renders from ``spec.access``.

The runtime runs on loopback, served as its pod would be: the Agent's certificate Secret (kept
current by ``MountedSecret``), TokenReview against this API server for the Agent's audience,
and the access file read from the ConfigMap the operator rendered. The command reaches it at
``spec.runtime.address`` (https); the pods tier reaches one in a pod through the port-forward
(tests/pods/test_workload.py). Who may decide is the API server's RBAC: ``create`` on
``serviceaccounts/token`` of the Agent's delegate, ``<agent>-approver``.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.agent_tls import MountedSecret
from tests.cluster.conftest import ROOT, Kubectl, Operator
from tests.cluster.controlplane import ControlPlane
from tests.cluster.test_approvals import COMPLETE, PUBLISH, RESULT
from tests.support.eventually import eventually
from tests.support.processes import Server, ankka_command, start

NS = "approvals-tls"
AGENT = "clerk"
DELEGATE = f"system:serviceaccount:{NS}:{AGENT}-approver"


class Clerk:
    def __init__(self, cp: ControlPlane, kubectl: Kubectl, runtime: Server, log: Path) -> None:
        self.cp, self.kubectl, self.runtime, self.log = cp, kubectl, runtime, log

    def approve(self, *args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            **self.cp.env(),
            "PYTHONPATH": str(ROOT),
            "KUBECONFIG": str(kubeconfig),
        }
        return subprocess.run(
            [sys.executable, "-m", "ankka", "approve", *args, "-n", NS],
            env=env, capture_output=True, text=True, timeout=60, cwd=ROOT,
        )  # fmt: skip

    def task_status(self, name: str) -> dict[str, Any]:
        status: dict[str, Any] = (self.kubectl.get("task", name, NS) or {}).get("status") or {}
        return status


def agent(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": AGENT, "namespace": NS},
        "spec": {
            "image": "registry.example/clerk:1",
            "module": "tests.integration.approval_services",
            "access": {"agents": {"refunds": {"read": ["ankka://service/audit/*"]}}},
            **spec,
        },
    }


def access_file(kubectl: Kubectl, directory: Path) -> Path:
    """The access file the operator rendered, written where the runtime reads it (a pod
    mounts the ConfigMap there)."""

    def rendered() -> str:
        found = kubectl.get("configmap", f"{AGENT}-access", NS)
        assert found is not None, "no access ConfigMap yet"
        return str(found["data"]["access.yaml"])

    text = eventually(rendered, what="the operator's access file")
    path = directory / "access.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def clerk(kubectl: Kubectl, operator: Operator, controlplane: ControlPlane) -> Iterator[Clerk]:
    workdir = controlplane.workdir / "clerk"
    workdir.mkdir(exist_ok=True)
    (workdir / "script.json").write_text(json.dumps([PUBLISH, COMPLETE]))
    model = start(ankka_command("standin", "--script", str(workdir / "script.json"), "--port", "0"))
    kubectl.run("create", "namespace", NS, check=False)
    kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump(agent()))
    policy = access_file(kubectl, workdir)
    (workdir / "runtime.token").write_text(
        kubectl.run("create", "token", AGENT, "-n", NS).stdout.strip()
    )
    log = workdir / "tool-runs.txt"
    env = {
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": f"{model.url}/v1",
        "ANKKA_MODEL_DEFAULT_MODEL": "standin",
        "ANKKA_TEST_TOOL_LOG": str(log),
        "ANKKA_APPROVER_HEADER": "X-Ankka-Approver",  # as the operator renders it
    }
    with MountedSecret(kubectl, NS, f"{AGENT}-tls", workdir / "tls") as mounted:
        runtime = start(
            ankka_command(
                "serve", "tests.integration.approval_services:service", "--port", "0",
                "--store", f"sqlite:///{workdir / 'store.sqlite3'}",
                "--tls-dir", str(mounted.directory),
                "--access-file", str(policy),
                "--token-review-url", controlplane.server,
                "--token-review-audience", f"ankka://service/{NS}/{AGENT}",
                "--token-review-credential", str(workdir / "runtime.token"),
                "--token-review-ca", str(controlplane.workdir / "pki" / "ca.crt"),
            ),
            env=env,
        )  # fmt: skip
        kubectl.run(
            "apply", "-f", "-", stdin=yaml.safe_dump(agent(runtime={"address": runtime.url}))
        )
        yield Clerk(controlplane, kubectl, runtime, log)
        runtime.stop()
    model.stop()


def person(cp: ControlPlane, kubectl: Kubectl, name: str) -> Path:
    """A kubeconfig of a ServiceAccount standing in for a person (this cluster has no users)."""
    kubectl.run("create", "serviceaccount", name, "-n", NS, check=False)
    token = kubectl.run("create", "token", name, "-n", NS).stdout.strip()
    ca = base64.b64encode((cp.workdir / "pki" / "ca.crt").read_bytes()).decode()
    path = cp.workdir / f"{name}.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "t",
                        "cluster": {"server": cp.server, "certificate-authority-data": ca},
                    }
                ],
                "users": [{"name": name, "user": {"token": token}}],
                "contexts": [{"name": "t", "context": {"cluster": "t", "user": name}}],
                "current-context": "t",
            }
        )
    )
    return path


def grant(kubectl: Kubectl, role: str, account: str, *rules: str) -> None:
    kubectl.run("create", "role", role, "-n", NS, *rules)
    kubectl.run(
        "create",
        "rolebinding",
        role,
        "-n",
        NS,
        f"--role={role}",
        f"--serviceaccount={NS}:{account}",
    )


def test_the_operator_renders_the_agents_policy_with_its_delegate(clerk: Clerk) -> None:
    rendered = yaml.safe_load((clerk.cp.workdir / "clerk" / "access.yaml").read_text())
    assert rendered["agents"] == {
        "refunds": {"read": ["ankka://service/audit/*"], "write": [], "decide": []}
    }
    assert rendered["approvers"] == [DELEGATE]
    assert clerk.kubectl.get("serviceaccount", f"{AGENT}-approver", NS) is not None


def test_ankka_approve_decides_through_the_delegate_over_mtls_with_rbacs_leave(
    clerk: Clerk,
) -> None:
    clerk.kubectl.run("apply", "-f", "-", stdin=yaml.safe_dump({
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Task",
        "metadata": {"name": "publish-tls", "namespace": NS},
        "spec": {"agent": AGENT, "autonomousAgent": "researcher", "type": "summary",
                 "instructions": "Publish ankka."},
    }))  # fmt: skip

    def pending() -> dict[str, Any]:
        approvals = clerk.task_status("publish-tls").get("approvals") or []
        assert approvals, clerk.task_status("publish-tls")
        return dict(approvals[0])

    waiting = eventually(pending, what="the Task's pending approval", timeout=90)
    ann = person(clerk.cp, clerk.kubectl, "ann")
    decide = ("publish-tls", waiting["id"], "--digest", waiting["digest"])
    grant(
        clerk.kubectl, "ann-decides", "ann",
        "--verb=get", "--resource=tasks.ankka.dev", "--resource=agents.ankka.dev",
    )  # fmt: skip
    grant(
        clerk.kubectl, "ann-approval", "ann", "--verb=update", "--resource=tasks.ankka.dev/approval"
    )
    # Allowed to decide by the command's check, but not to act through the delegate: refused
    # by the API server (TokenRequest), and nothing reaches the runtime.
    denied = clerk.approve(*decide, kubeconfig=ann)
    assert denied.returncode == 1, denied.stdout
    assert "serviceaccounts/token" in denied.stderr and f"{AGENT}-approver" in denied.stderr
    assert not clerk.log.exists()
    grant(
        clerk.kubectl, "ann-delegates", "ann",
        "--verb=create", "--resource=serviceaccounts/token", f"--resource-name={AGENT}-approver",
    )  # fmt: skip
    decided = clerk.approve(*decide, kubeconfig=ann)
    assert decided.returncode == 0, decided.stderr
    answer = json.loads(decided.stdout)
    assert answer["decided_by"] == f"system:serviceaccount:{NS}:ann (through {DELEGATE})"

    def completed() -> dict[str, Any]:
        status = clerk.task_status("publish-tls")
        assert status.get("phase") == "Completed", status
        return status

    done = eventually(completed, what="the Task completed", timeout=90)
    assert done["result"] == RESULT
    assert clerk.log.read_text().splitlines() == ["publish ankka"]
    assert "Bearer" not in decided.stdout + decided.stderr  # the token is never printed
