"""Task resources end to end: ``kubectl apply`` of a Task against the real API server, the
operator handing it to an ``ankka serve`` runtime, and the result read back with kubectl.

Pods do not run in this control plane, so the runtime runs on loopback and the Agent names it
with ``spec.runtime.address``, the documented way for a runtime outside the cluster. It serves
mTLS with the Agent's own certificate (the Secret the operator renders, copied as the kubelet
would mount it) at ``https://127.0.0.1:PORT``; the operator hands it Tasks as
``ankka://platform/operator`` and refuses a runtime whose certificate names another Agent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.cluster.agent_tls import MountedSecret, platform_client
from tests.cluster.conftest import ROOT, Kubectl, Operator
from tests.cluster.controlplane import ControlPlane
from tests.support.eventually import eventually
from tests.support.processes import Server, ankka_command, start

NS = "lab"
LOOKUP = {"when": "user", "tool_calls": [{"name": "lookup", "arguments": {"topic": "ankka"}}]}
RESULT = {"title": "ankka", "points": ["ankka is an agent platform for Kubernetes, in Python."]}
COMPLETE = {"when": "tool", "tool_calls": [{"name": "complete_task", "arguments": RESULT}]}
FAIL = {"tool_calls": [{"name": "fail_task", "arguments": {"reason": "nothing to say"}}]}


class Lab:
    def __init__(
        self, kubectl: Kubectl, model: Server, runtime: Server, workdir: Path, client: httpx.Client
    ) -> None:
        self.kubectl = kubectl
        self.model = model
        self.runtime = runtime
        self.workdir = workdir
        self.client = client  # mTLS, as a platform identity of the tests' own

    def record(self, uid: str) -> httpx.Response:
        """The runtime's own record of a task, read over mTLS."""
        return self.client.get(f"{self.runtime.url}/v1/tasks/{uid}")

    def script(self, turns: list[dict[str, Any]]) -> None:
        httpx.put(f"{self.model.url}/_standin/script", json=turns).raise_for_status()

    def apply(self, *objects: dict[str, Any]) -> None:
        path = self.workdir / "objects.yaml"
        path.write_text(yaml.safe_dump_all(objects))
        self.kubectl.run("apply", "-f", str(path))

    def task(self, name: str) -> dict[str, Any]:
        found = self.kubectl.get("task", name, NS)
        assert found is not None, name
        return found

    def status_of(self, name: str) -> dict[str, Any]:
        status: dict[str, Any] = self.task(name).get("status") or {}
        return status


def task(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Task",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "agent": "research",
            "autonomousAgent": "researcher",
            "type": "summary",
            "instructions": "Summarise ankka.",
            **spec,
        },
    }


def agent(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"image": "registry.example/lab:1", "module": "examples.tasks", **spec},
    }


@pytest.fixture(scope="module")
def lab(kubectl: Kubectl, operator: Operator, controlplane: ControlPlane) -> Iterator[Lab]:
    workdir = controlplane.workdir / "lab"
    workdir.mkdir(exist_ok=True)
    script = workdir / "script.json"
    script.write_text("[]")
    model = start(ankka_command("standin", "--script", str(script), "--port", "0"))
    env = {
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": f"{model.url}/v1",
        "ANKKA_MODEL_DEFAULT_MODEL": "standin",
    }
    store = f"sqlite:///{workdir / 'tasks.sqlite3'}"
    kubectl.run("create", "namespace", NS, check=False)
    # The Agent first: its Secret is what the runtime serves; then where the runtime listens.
    objects = workdir / "research.yaml"
    objects.write_text(yaml.safe_dump(agent("research")))
    kubectl.run("apply", "-f", str(objects))
    with MountedSecret(kubectl, NS, "research-tls", workdir / "research-tls") as mounted:
        # The team: the researcher of examples/tasks.py and a lead that delegates to it.
        command = ankka_command("serve", "examples.team:service", "--port", "0")
        tls = ["--tls-dir", str(mounted.directory), "--store", store]
        runtime = start([*command, *tls], env=env)
        assert runtime.url.startswith("https://127.0.0.1:"), runtime.url
        here = Lab(kubectl, model, runtime, workdir, platform_client(kubectl, workdir / "tests"))
        here.apply(agent("research", runtime={"address": runtime.url}))
        eventually(
            lambda: (
                (kubectl.get("agent", "research", NS) or {}).get("status", {}).get("phase")
                == "Progressing"
            ),
            what="the research Agent rendered (no pods in this tier: Progressing)",
            timeout=60,
        )
        yield here
        here.client.close()
        runtime.stop()
        model.stop()


def test_an_applied_task_is_worked_by_its_agent_s_runtime_and_ends_completed(lab: Lab) -> None:
    lab.script([LOOKUP, COMPLETE])
    lab.apply(task("summary-1"))
    status = eventually(
        lambda: (s := lab.status_of("summary-1")).get("phase") == "Completed" and s,
        what="the Task to complete",
        timeout=60,
    )
    assert status["result"] == RESULT
    assert status["iterationsUsed"] == 2 and status["iterationBudget"] == 5
    assert status["tokens"] == {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    uid = lab.task("summary-1")["metadata"]["uid"]
    assert status["runtimeTask"] == uid
    handed = [c for c in status["conditions"] if c["type"] == "Handed"]
    assert handed and handed[0]["status"] == "True"
    record = lab.record(uid).json()
    assert record["state"] == "completed" and record["version"] == status["lastEvent"]
    # Handed over mTLS, by the operator's own identity.
    assert record["created_by"] == "ankka://platform/operator"
    # The runtime (its console) knows the task by the Task's namespace and name, not only uid.
    assert record["name"] == f"{NS}/summary-1"
    table = lab.kubectl.run("get", "tasks", "-n", NS).stdout
    header, row = (
        table.splitlines()[0],
        next(line for line in table.splitlines() if line.startswith("summary-1")),
    )
    columns = ["NAME", "AGENT", "TYPE", "PHASE", "ITERATIONS", "BUDGET", "PARENT", "AGE"]
    assert header.split() == columns
    assert row.split()[1:6] == ["research", "summary", "Completed", "2", "5"]
    assert len(row.split()) == len(columns) - 1  # no parent: that cell is empty
    # kubectl describe shows what the operator did: handed over, then completed.
    selector = "involvedObject.kind=Task,involvedObject.name=summary-1"
    seen = eventually(
        lambda: (
            (
                r := {
                    e["reason"]
                    for e in yaml.safe_load(
                        lab.kubectl.run(
                            "get", "events", "-n", NS, "--field-selector", selector, "-o", "json"
                        ).stdout
                    )["items"]
                    if e["source"].get("component") == "ankka-operator"
                }
            )
            >= {"Handed", "Completed"}
            and r
        ),
        what="the Task's Handed and Completed Events",
        timeout=30,
    )
    assert "Failed" not in seen


def test_a_task_whose_dependency_fails_ends_cancelled(lab: Lab) -> None:
    lab.script([FAIL])
    lab.apply(task("root"), task("child", dependsOn=["root"]))
    eventually(
        lambda: lab.status_of("root").get("phase") == "Failed", what="the root to fail", timeout=60
    )
    assert lab.status_of("root")["reason"] == "nothing to say"
    status = eventually(
        lambda: (s := lab.status_of("child")).get("phase") == "Cancelled" and s,
        what="the child to be cancelled",
        timeout=60,
    )
    assert status["iterationsUsed"] == 0
    assert "'root'" in status["reason"] and "was failed" in status["reason"]


def test_deleting_a_running_task_cancels_it(lab: Lab) -> None:
    lab.script([{**LOOKUP, "delay_ms": 15_000}, COMPLETE])
    lab.apply(task("doomed"))
    eventually(
        lambda: lab.status_of("doomed").get("state") == "in-progress",
        what="the Task to be running",
        timeout=60,
    )
    uid = lab.task("doomed")["metadata"]["uid"]
    lab.kubectl.run("delete", "task", "doomed", "-n", NS, "--wait=true", "--timeout=60s")
    record = eventually(
        lambda: (r := lab.record(uid).json())["state"] == "cancelled" and r,
        what="the runtime to cancel the task",
        timeout=60,
    )
    assert record["iterations"]["used"] == 1  # it stopped at the end of its iteration


def test_an_agent_held_for_its_models_holds_its_tasks(lab: Lab) -> None:
    lab.apply(
        agent("waiting", models=[{"name": "default", "installation": "absent"}]),
        task("held", agent="waiting"),
    )

    def held() -> dict[str, Any] | None:
        status = lab.status_of("held")
        found = [c for c in status.get("conditions") or [] if c["reason"] == "AgentHeld"]
        return status if found else None

    status = eventually(held, what="the Task to wait for its held Agent", timeout=60)
    assert status["phase"] == "Pending"
    handed = next(c for c in status["conditions"] if c["type"] == "Handed")
    assert handed["status"] == "False"
    assert "absent" in handed["message"]
    assert status.get("runtimeTask") is None


def test_a_task_s_spec_cannot_change(lab: Lab) -> None:
    lab.script([FAIL])
    lab.apply(task("fixed"))
    out = lab.kubectl.run(
        "patch",
        "task",
        "fixed",
        "-n",
        NS,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"instructions": "Something else."}}),
        check=False,
    )
    assert out.returncode != 0 and "a Task's spec cannot change" in out.stderr


def test_kubectl_explain_documents_every_field_of_a_task_s_spec(lab: Lab) -> None:
    text = lab.kubectl.run("explain", "task.spec").stdout
    for field in (
        "agent",
        "autonomousAgent",
        "type",
        "instructions",
        "attachments",
        "dependsOn",
        "instance",
    ):
        assert f"{field}\t" in text or f"  {field} " in text or f"{field} <" in text, field
    assert "The Agent (resource) whose runtime works the task." in text
    assert "must complete first" in text


def test_a_runtime_whose_certificate_names_another_agent_is_refused(lab: Lab) -> None:
    # The impostor Agent points at research's runtime, which serves research's certificate.
    lab.apply(agent("impostor", runtime={"address": lab.runtime.url}))
    lab.apply(task("misled", agent="impostor"))

    def refused() -> dict[str, Any] | None:
        conditions = lab.status_of("misled").get("conditions") or []
        found = [c for c in conditions if c.get("reason") == "WrongRuntimeIdentity"]
        return found[0] if found else None

    handed = eventually(refused, what="the operator to refuse the runtime", timeout=60)
    assert handed["type"] == "Handed" and handed["status"] == "False"
    assert "ankka://service/lab/research, not ankka://service/lab/impostor" in handed["message"]
    assert "lab/impostor-tls" in handed["message"]  # what the runtime should serve instead
    assert lab.status_of("misled")["phase"] == "Pending"
    # Nothing reached the runtime: refused in the handshake, before the request was sent.
    uid = lab.task("misled")["metadata"]["uid"]
    assert lab.record(uid).status_code == 404
    lab.kubectl.run("delete", "task", "misled", "-n", NS, "--wait=true", "--timeout=60s")


def test_a_delegating_tasks_status_shows_its_children(lab: Lab) -> None:
    team = json.loads((ROOT / "examples/team-standin.json").read_text())
    lab.script(team)
    report = {"autonomousAgent": "lead", "type": "report", "instructions": "Report on both."}
    lab.apply(task("report-1", **report))
    status = eventually(
        lambda: (s := lab.status_of("report-1")).get("phase") == "Completed" and s,
        what="the report to complete",
        timeout=90,
    )
    uid = lab.task("report-1")["metadata"]["uid"]
    assert status["children"] == [f"{uid}:1.0", f"{uid}:1.1"]
    assert status.get("parent") is None
    child = lab.record(f"{uid}:1.0").json()
    assert child["parent"] == uid and child["state"] == "completed"
