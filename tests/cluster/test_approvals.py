"""A Task's tool approval in the cluster: the operator lists the pending approval in the
Task's status (``kubectl get task``), ``ankka approve`` decides it as a person whom RBAC
allows, the runtime records the API server's username for them, and the Task completes.

The runtime runs on loopback (no kubelet here); the Agent names it with
``spec.runtime.address``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.cluster.conftest import ROOT, Kubectl, Operator
from tests.cluster.controlplane import ControlPlane
from tests.support.eventually import eventually
from tests.support.processes import Server, ankka_command, start

NS = "approvals-lab"
PUBLISH = {"when": "user", "tool_calls": [{"name": "publish", "arguments": {"topic": "ankka"}}]}
RESULT = {"title": "ankka", "points": ["published"]}
COMPLETE = {"when": "tool", "tool_calls": [{"name": "complete_task", "arguments": RESULT}]}


class Desk:
    """A runtime on loopback named by an Agent of ``namespace``, and the commands deciding its
    Tasks' approvals (tests/cluster/test_mcp_questions.py's desk too)."""

    def __init__(
        self, cp: ControlPlane, kubectl: Kubectl, runtime: Server, log: Path, namespace: str = NS
    ) -> None:
        self.cp = cp
        self.kubectl = kubectl
        self.runtime = runtime
        self.log = log
        self.namespace = namespace

    def apply(self, *objects: dict[str, Any]) -> None:
        path = self.cp.workdir / f"{self.namespace}-objects.yaml"
        path.write_text(yaml.safe_dump_all(objects))
        self.kubectl.run("apply", "-f", str(path))

    def status_of(self, name: str) -> dict[str, Any]:
        found = self.kubectl.get("task", name, self.namespace) or {}
        status: dict[str, Any] = found.get("status") or {}
        return status

    def register(self, agent: str, module: str) -> None:
        """Create the namespace and an Agent of ``module`` naming the runtime on loopback."""
        self.kubectl.run("create", "namespace", self.namespace, check=False)
        self.apply(
            {
                "apiVersion": "ankka.dev/v1alpha1",
                "kind": "Agent",
                "metadata": {"name": agent, "namespace": self.namespace},
                "spec": {
                    "image": f"registry.example/{agent}:1",
                    "module": module,
                    "runtime": {"address": self.runtime.url},
                },
            }
        )
        eventually(
            lambda: (
                (self.kubectl.get("agent", agent, self.namespace) or {})
                .get("status", {})
                .get("phase")
                == "Progressing"
            ),
            what=f"the {agent} Agent rendered (no pods in this tier: Progressing, never Ready)",
            timeout=60,
        )

    def awaiting(self, name: str, agent: str, autonomous: str, instructions: str) -> dict[str, Any]:
        """Apply a summary Task for ``autonomous`` of ``agent``; its status once it lists a
        pending approval."""
        spec = {"agent": agent, "autonomousAgent": autonomous, "type": "summary"}
        self.apply(
            {
                "apiVersion": "ankka.dev/v1alpha1",
                "kind": "Task",
                "metadata": {"name": name, "namespace": self.namespace},
                "spec": {**spec, "instructions": instructions},
            }
        )
        status: dict[str, Any] = eventually(
            lambda: (s := self.status_of(name)).get("approvals") and s,
            what="the Task to list its pending approval",
            timeout=60,
        )
        return status

    def approve(
        self, *args: str, kubeconfig: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {**self.cp.env(), "PYTHONPATH": str(ROOT)}
        if kubeconfig is not None:
            env["KUBECONFIG"] = str(kubeconfig)
        return subprocess.run(
            [sys.executable, "-m", "ankka", "approve", *args, "-n", self.namespace],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )


@pytest.fixture(scope="module")
def desk(kubectl: Kubectl, operator: Operator, controlplane: ControlPlane) -> Iterator[Desk]:
    workdir = controlplane.workdir / "approvals"
    workdir.mkdir(exist_ok=True)
    script = workdir / "script.json"
    script.write_text(json.dumps([PUBLISH, COMPLETE]))
    model = start(ankka_command("standin", "--script", str(script), "--port", "0"))
    log = workdir / "tool-runs.txt"
    env = {
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": f"{model.url}/v1",
        "ANKKA_MODEL_DEFAULT_MODEL": "standin",
        "ANKKA_TEST_TOOL_LOG": str(log),
    }
    store = f"sqlite:///{workdir / 'store.sqlite3'}"
    command = ankka_command(
        "serve", "tests.integration.approval_services:service", "--port", "0", "--store", store
    )
    runtime = start([*command, "--approver-header", "X-Ankka-Approver"], env=env)
    here = Desk(controlplane, kubectl, runtime, log)
    here.register("desk", "tests.integration.approval_services")
    yield here
    runtime.stop()
    model.stop()


def _kubeconfig_of(cp: ControlPlane, kubectl: Kubectl, account: str) -> Path:
    kubectl.run("create", "serviceaccount", account, "-n", NS, check=False)
    token = kubectl.run("create", "token", account, "-n", NS).stdout.strip()
    path = cp.workdir / f"{account}.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "test",
                        "cluster": {
                            "server": cp.server,
                            "certificate-authority": str(cp.workdir / "pki" / "ca.crt"),
                        },
                    }
                ],
                "users": [{"name": account, "user": {"token": token}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": account}}],
                "current-context": "test",
            }
        )
    )
    return path


def test_a_task_s_pending_approval_is_listed_and_decided_through_rbac(desk: Desk) -> None:
    status = desk.awaiting("publish-1", "desk", "researcher", "Publish ankka.")
    assert status["phase"] == "AwaitingApproval" and status["state"] == "awaiting-approval"
    (pending,) = status["approvals"]
    assert pending["tool"] == "publish" and len(pending["digest"]) == 64
    wide = desk.kubectl.run("get", "task", "publish-1", "-n", NS, "-o", "wide").stdout
    assert pending["id"] in wide and "AwaitingApproval" in wide

    # A person who may read Tasks but lacks the verb is refused before the runtime hears.
    viewer = _kubeconfig_of(desk.cp, desk.kubectl, "viewer")
    desk.kubectl.run(
        "create",
        "role",
        "task-reader",
        "-n",
        NS,
        "--verb=get",
        "--resource=tasks.ankka.dev",
        "--resource=agents.ankka.dev",
    )
    desk.kubectl.run(
        "create",
        "rolebinding",
        "viewer-reads",
        "-n",
        NS,
        "--role=task-reader",
        f"--serviceaccount={NS}:viewer",
    )
    denied = desk.approve(
        "publish-1", pending["id"], "--digest", pending["digest"], kubeconfig=viewer
    )
    assert denied.returncode == 1 and "tasks/approval" in denied.stderr, denied.stderr
    assert not desk.log.exists()

    # Granted update on tasks/approval, the same person decides; the username is recorded.
    desk.kubectl.run(
        "create",
        "role",
        "task-approver",
        "-n",
        NS,
        "--verb=update",
        "--resource=tasks.ankka.dev/approval",
    )
    desk.kubectl.run(
        "create",
        "rolebinding",
        "viewer-approves",
        "-n",
        NS,
        "--role=task-approver",
        f"--serviceaccount={NS}:viewer",
    )
    wrong = desk.approve("publish-1", pending["id"], "--digest", "0" * 64, kubeconfig=viewer)
    assert wrong.returncode == 1 and "409" in wrong.stderr, wrong.stderr
    decided = desk.approve(
        "publish-1", pending["id"], "--digest", pending["digest"], kubeconfig=viewer
    )
    assert decided.returncode == 0, decided.stderr
    assert json.loads(decided.stdout)["decided_by"] == f"system:serviceaccount:{NS}:viewer"
    done = eventually(
        lambda: (s := desk.status_of("publish-1")).get("phase") == "Completed" and s,
        what="the Task to complete",
        timeout=60,
    )
    assert done["result"] == RESULT and done["approvals"] == []
    assert desk.log.read_text().splitlines() == ["publish ankka"]
    listed = httpx.get(
        f"{desk.runtime.url}/v1/approvals", params={"session": f"task:{done['runtimeTask']}"}
    ).json()["approvals"]
    assert [(a["state"], a["decided_by"]) for a in listed] == [
        ("approved", f"system:serviceaccount:{NS}:viewer")
    ]
