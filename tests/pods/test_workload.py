"""An Agent as a platform team runs one (issue 27), on the real node after tests/pods/test_pods.py:
replicas on PostgreSQL sharing one session, ``kubectl wait`` meaning the pods serve, a
restricted namespace, the pod overlay reaching the pod, ``ankka approve`` through the
port-forward, and last the uninstall the chart's NOTES describe, then the chart as a subchart.

The chart here has the tier's PostgreSQL (Debian's server, listening on the node's address in
the test's network namespace) as every Agent's default store (``store.postgres``,
tests/pods/conftest.py); the replicas' Agent names its own, a DSN in a Secret.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.cluster.agent_tls import platform_client
from tests.cluster.test_subchart import umbrella
from tests.pods.conftest import PLATFORM_NS, ROOT, VERSION, Cluster, image
from tests.pods.manifests import NS, standin
from tests.support.eventually import eventually

TURNS = 100
ECHO = "echo"  # the stand-in these tests script


@pytest.fixture(scope="module", autouse=True)
def _platform(cluster: Cluster, helm_release: str) -> None:
    """The chart (installed by whichever module of the tier asks first: test_pods.py when the
    tier runs whole) and the namespace, so this file also runs without test_pods.py (but for
    the check of test_pods.py's Agents' schemas)."""
    cluster.kubectl.run("create", "namespace", NS, check=False)


def echo_url(cluster: Cluster) -> str:
    svc = cluster.kubectl.get("service", ECHO, NS)
    assert svc is not None
    return f"http://{svc['spec']['clusterIP']}:8080"


def script(cluster: Cluster, turns: list[dict[str, Any]]) -> None:
    """Give the echo stand-in a new script (and forget what it received)."""
    answer = httpx.put(f"{echo_url(cluster)}/_standin/script", json=turns, timeout=30)
    assert answer.status_code < 300, answer.text


def received(cluster: Cluster) -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = httpx.get(
        f"{echo_url(cluster)}/_standin/requests", timeout=30
    ).json()["requests"]
    return requests


def agent(name: str, namespace: str = NS, **spec: Any) -> dict[str, Any]:
    model = {
        "name": "default",
        "preset": "openai-compatible",
        "address": f"http://{ECHO}.{NS}.svc:8080/v1",
        "model": "standin",
    }
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"image": image("weather"), "module": "duo_agent", "models": [model], **spec},
    }


def ready_pods(cluster: Cluster, name: str, namespace: str = NS) -> list[dict[str, Any]]:
    return cluster.ready_pods(namespace, f"app.kubernetes.io/instance={name}")


def wait_ready(
    cluster: Cluster, name: str, namespace: str = NS, timeout: str = "240s"
) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl.run(
        "wait", "--for=condition=Ready", f"agent/{name}", "-n", namespace, f"--timeout={timeout}",
        check=False,
    )  # fmt: skip


def turn(
    cluster: Cluster,
    pod: dict[str, Any],
    session: str,
    message: str,
    *,
    client: httpx.Client | None = None,
) -> httpx.Response:
    """One turn of the module's agent ``duo``, sent to one pod (by its IP, over mTLS)."""
    return cluster.call_pod(
        pod,
        "POST",
        f"/v1/agents/duo/sessions/{session}",
        client=client,
        json={"message": message},
    )


def users_in(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "user"]


def system_of(request: dict[str, Any]) -> str:
    return next(str(m["content"]) for m in request["body"]["messages"] if m["role"] == "system")


def test_the_echo_stand_in_runs(cluster: Cluster) -> None:
    for doc in standin(name=ECHO):
        cluster.apply(doc)
    cluster.wait_ready("the echo stand-in", NS, f"app.kubernetes.io/instance={ECHO}")


def test_kubectl_wait_never_returns_for_an_agent_whose_image_is_missing(cluster: Cluster) -> None:
    cluster.apply(agent("ghost", image="localhost/ankka/missing:0", replicas=1))
    refused = wait_ready(cluster, "ghost", timeout="20s")
    assert refused.returncode != 0, refused.stdout
    status = (cluster.kubectl.get("agent", "ghost", NS) or {}).get("status") or {}
    assert status.get("phase") == "Progressing" and status.get("replicasReady") == "0/1", status
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "Progressing")
    cluster.kubectl.run("delete", "agent", "ghost", "-n", NS, "--wait=false")


def test_two_replicas_on_postgres_share_one_session_turn_by_turn(cluster: Cluster) -> None:
    script(cluster, [{"text": f"reply {i}"} for i in range(TURNS + 2)])
    cluster.kubectl.run(
        "create", "secret", "generic", "duo-db", "-n", NS,
        f"--from-literal=uri={cluster.postgres.dsn()}",
    )  # fmt: skip
    cluster.apply(
        agent(
            "duo",
            replicas=2,
            store={"postgres": {"dsnSecretRef": {"name": "duo-db", "key": "uri"}}},
        )
    )
    done = wait_ready(cluster, "duo")
    assert done.returncode == 0, done.stderr + json.dumps(
        (cluster.kubectl.get("agent", "duo", NS) or {}).get("status")
    )
    pods = ready_pods(cluster, "duo")
    assert len(pods) == 2, "Ready returned before both replicas were available"
    assert (cluster.kubectl.get("agent", "duo", NS) or {})["status"]["replicasReady"] == "2/2"
    names = [p["metadata"]["name"] for p in pods]
    for i in range(TURNS):
        answer = turn(cluster, pods[i % 2], "shared", f"turn {i}")
        assert answer.status_code == 200, (i, answer.text)
        assert answer.json()["reply"] == f"reply {i}"
    sent = received(cluster)
    assert len(sent) == TURNS
    for i, request in enumerate(sent):
        # The replica that ran the turn is the one it was sent to, and it saw every turn
        # before it, whichever replica had run that one.
        assert names[i % 2] in system_of(request), (i, system_of(request))
        assert users_in(request) == [f"turn {k}" for k in range(i + 1)], i
        replies = [m["content"] for m in request["body"]["messages"] if m["role"] == "assistant"]
        assert replies == [f"reply {k}" for k in range(i)], i


def test_a_killed_replica_loses_nothing(cluster: Cluster) -> None:
    first, second = ready_pods(cluster, "duo")
    cluster.kubectl.run(
        "delete", "pod", first["metadata"]["name"], "-n", NS, "--grace-period=0", "--force"
    )
    answer = turn(cluster, second, "shared", f"turn {TURNS}")
    assert answer.status_code == 200, answer.text
    assert users_in(received(cluster)[-1]) == [f"turn {k}" for k in range(TURNS + 1)]
    # The Deployment replaces the pod; Ready again once it serves, and it has everything.
    assert wait_ready(cluster, "duo").returncode == 0
    (fresh,) = [
        p
        for p in ready_pods(cluster, "duo")
        if p["metadata"]["uid"] not in (first["metadata"]["uid"], second["metadata"]["uid"])
    ]
    answer = turn(cluster, fresh, "shared", f"turn {TURNS + 1}")
    assert answer.status_code == 200, answer.text
    assert fresh["metadata"]["name"] in system_of(received(cluster)[-1])
    assert users_in(received(cluster)[-1]) == [f"turn {k}" for k in range(TURNS + 2)]
    messages = cluster.call_pod(fresh, "GET", "/v1/sessions/shared/messages").json()["messages"]
    assert len(messages) == 2 * (TURNS + 2)


def test_the_charts_default_store_is_the_shared_postgres(cluster: Cluster) -> None:
    # The Agents of test_pods.py name no store: the chart's store.postgres serves them, each in
    # a schema of its own, from a copy of the platform's Secret next to it.
    copy = cluster.kubectl.get("secret", "chat-store", NS)
    assert copy is not None and copy["metadata"]["ownerReferences"][0]["name"] == "chat"
    with psycopg.connect(cluster.postgres.local) as conn:
        schemas = {row[0] for row in conn.execute(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'ankka_events'"
        )}  # fmt: skip
    assert {"ankka_shop_chat", "ankka_shop_duo"} <= schemas, schemas


def test_an_agent_runs_in_a_restricted_namespace_with_its_overlay(cluster: Cluster) -> None:
    locked = "locked"
    cluster.kubectl.run("create", "namespace", locked)
    cluster.kubectl.run(
        "label", "namespace", locked, "pod-security.kubernetes.io/enforce=restricted"
    )
    cluster.kubectl.run(
        "create", "secret", "generic", "guard-secret", "-n", locked, "--from-literal=token=s3cret"
    )
    cluster.apply(
        agent(
            "guard",
            locked,
            resources={"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "768Mi"}},
            env=[
                {
                    "name": "GUARD_TOKEN",
                    "valueFrom": {"secretKeyRef": {"name": "guard-secret", "key": "token"}},
                }
            ],
        )
    )
    done = wait_ready(cluster, "guard", locked)
    assert done.returncode == 0, done.stderr + json.dumps(
        (cluster.kubectl.get("agent", "guard", locked) or {}).get("status")
    )
    (pod,) = ready_pods(cluster, "guard", locked)
    (container,) = pod["spec"]["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "50m", "memory": "64Mi"},
        "limits": {"memory": "768Mi"},
    }
    shown = cluster.kubectl.run(
        "exec", pod["metadata"]["name"], "-n", locked, "-c", "runtime", "--",
        "python3", "-c", "import os; print(os.environ['GUARD_TOKEN'])",
    )  # fmt: skip
    assert shown.stdout.strip() == "s3cret"
    assert "s3cret" not in json.dumps(cluster.kubectl.get("deployment", "guard", locked))
    script(cluster, [{"text": "guarded"}])
    answer = turn(cluster, pod, "g1", "hello")
    assert answer.status_code == 200 and answer.json()["reply"] == "guarded", answer.text
    # The chart's own pods would be admitted under restricted too: the API server's dry run
    # of the label warns about every running pod that violates it, and warns of none.
    checked = cluster.kubectl.run(
        "label", "--dry-run=server", "--overwrite", "namespace", PLATFORM_NS,
        "pod-security.kubernetes.io/enforce=restricted",
    )  # fmt: skip
    assert "violate" not in checked.stderr, checked.stderr


def person(cluster: Cluster, name: str) -> Path:
    """A kubeconfig of a ServiceAccount standing in for a person (the tier has no users)."""
    cluster.kubectl.run("create", "serviceaccount", name, "-n", NS)
    token = cluster.kubectl.run("create", "token", name, "-n", NS).stdout.strip()
    path = cluster.cp.workdir / f"{name}.kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "t",
                        "cluster": {
                            "server": cluster.cp.server,
                            "certificate-authority": str(cluster.cp.workdir / "pki" / "ca.crt"),
                        },
                    }
                ],
                "users": [{"name": name, "user": {"token": token}}],
                "contexts": [{"name": "t", "context": {"cluster": "t", "user": name}}],
                "current-context": "t",
            }
        )
    )
    return path


def test_ankka_approve_reaches_a_runtime_pod_through_the_port_forward(cluster: Cluster) -> None:
    publish = {"when": "user", "tool_calls": [{"name": "publish", "arguments": {"topic": "ankka"}}]}
    result = {"title": "ankka", "points": ["published"]}
    complete = {"when": "tool", "tool_calls": [{"name": "complete_task", "arguments": result}]}
    script(cluster, [publish, complete])
    cluster.apply(
        {**agent("desk", replicas=1), "spec": {**agent("desk")["spec"], "module": "desk_agent"}}
    )
    assert wait_ready(cluster, "desk").returncode == 0
    cluster.apply({
        "apiVersion": "ankka.dev/v1alpha1", "kind": "Task",
        "metadata": {"name": "publish-1", "namespace": NS},
        "spec": {"agent": "desk", "autonomousAgent": "researcher", "type": "summary",
                 "instructions": "Publish ankka."},
    })  # fmt: skip

    def pending() -> dict[str, Any]:
        status = (cluster.kubectl.get("task", "publish-1", NS) or {}).get("status") or {}
        assert status.get("approvals"), status
        return dict(status["approvals"][0])

    waiting = eventually(pending, what="the Task's pending approval", timeout=120)
    ann = person(cluster, "ann")
    rules = [
        ("get", "tasks.ankka.dev,agents.ankka.dev", ""),
        ("update", "tasks.ankka.dev/approval", ""),
        ("create", "serviceaccounts/token", "desk-approver"),
        ("get,list", "pods", ""),
        # The client's port-forward is a WebSocket: a GET (kubectl's own, SPDY, a create).
        ("get,create", "pods/portforward", ""),
    ]
    for i, (verbs, resources, name) in enumerate(rules):
        extra = [f"--resource-name={name}"] if name else []
        cluster.kubectl.run(
            "create", "role", f"ann-{i}", "-n", NS, f"--verb={verbs}", f"--resource={resources}",
            *extra,
        )  # fmt: skip
        cluster.kubectl.run(
            "create", "rolebinding", f"ann-{i}", "-n", NS, f"--role=ann-{i}",
            f"--serviceaccount={NS}:ann",
        )  # fmt: skip
    decided = subprocess.run(
        [sys.executable, "-m", "ankka", "approve", "publish-1", waiting["id"],
         "--digest", waiting["digest"], "-n", NS],
        env={**cluster.cp.env(), "KUBECONFIG": str(ann), "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert decided.returncode == 0, decided.stderr
    delegate = f"system:serviceaccount:{NS}:desk-approver"
    assert (
        json.loads(decided.stdout)["decided_by"]
        == f"system:serviceaccount:{NS}:ann (through {delegate})"
    )

    def completed() -> dict[str, Any]:
        status = (cluster.kubectl.get("task", "publish-1", NS) or {}).get("status") or {}
        assert status.get("phase") == "Completed", status
        return status

    assert eventually(completed, what="the Task completed", timeout=120)["result"] == result


def test_uninstall_as_the_notes_say_leaves_nothing_of_ankka(cluster: Cluster) -> None:
    notes = cluster.helm("status", "ankka", "-n", PLATFORM_NS).stdout
    steps = [
        line.strip()
        for line in notes.splitlines()
        if line.strip().startswith(("kubectl delete", "helm uninstall"))
    ]
    assert len(steps) == 5, notes  # a. to e.
    # A Task still waiting (its Agent does not exist) carries the operator's finalizer.
    cluster.apply({
        "apiVersion": "ankka.dev/v1alpha1", "kind": "Task",
        "metadata": {"name": "orphan", "namespace": NS},
        "spec": {"agent": "nobody", "type": "summary", "instructions": "Summarise."},
    })  # fmt: skip
    eventually(
        lambda: (
            "ankka.dev/task-cancellation"
            in ((cluster.kubectl.get("task", "orphan", NS) or {}).get("metadata") or {}).get(
                "finalizers", []
            )
        ),
        what="the orphan Task's finalizer",
    )
    for step in steps:
        words = step.split()
        run = (
            cluster.helm(*words[1:])
            if words[0] == "helm"
            else cluster.kubectl.run(*words[1:], "--timeout=110s", check=False)
        )
        assert run.returncode == 0, (step, run.stdout, run.stderr)

    def left() -> str:
        out = cluster.kubectl.run(
            "get", "deployments,services,serviceaccounts,secrets,configmaps,networkpolicies",
            "-A", "-l", "app.kubernetes.io/part-of=ankka", "-o", "name", check=False,
        )  # fmt: skip
        assert out.stdout.strip() == "", out.stdout  # the garbage collector may still work
        return "nothing"

    eventually(left, what="nothing of ankka left", timeout=180)
    crds = cluster.kubectl.run("get", "crd", "-o", "name").stdout
    assert "ankka.dev" not in crds, crds
    roles = cluster.kubectl.run("get", "clusterroles,clusterrolebindings", "-o", "name").stdout
    assert "ankka-" not in roles, roles
    eventually(
        lambda: not cluster.pods(NS, "app.kubernetes.io/name=agent"),
        what="the runtime pods gone",
        timeout=180,
    )


def test_the_chart_installs_as_a_subchart_and_serves(cluster: Cluster, tmp_path: Path) -> None:
    values = f"""global: {{imageRegistry: localhost}}
ankka:
  enabled: true
  image: {{repository: localhost/ankka/ankka, tag: "{VERSION}", pullPolicy: Never}}
"""
    chart = umbrella(tmp_path, values)
    built = cluster.helm("dependency", "build", str(chart))
    assert built.returncode == 0, built.stderr
    platform = "ankka-platform"
    installed = cluster.helm(
        "install", "platform", str(chart), "-n", platform, "--create-namespace"
    )
    assert installed.returncode == 0, installed.stderr
    cluster.wait_ready("the subchart's operator", platform, "app.kubernetes.io/name=ankka-operator")
    cluster.wait_ready("the subchart's gateway", platform, "app.kubernetes.io/name=ankka-gateway")
    cluster.apply(agent("again", replicas=1))
    done = wait_ready(cluster, "again")
    assert done.returncode == 0, done.stderr
    script(cluster, [{"text": "served again"}])
    (pod,) = ready_pods(cluster, "again")
    # A client of the new platform's CA (the subchart's operator made it in its namespace).
    ours = platform_client(
        cluster.kubectl, tmp_path / "tls", check_hostname=True, namespace=platform
    )
    with ours:
        answer = turn(cluster, pod, "s", "hi", client=ours)
    assert answer.status_code == 200 and answer.json()["reply"] == "served again", answer.text
