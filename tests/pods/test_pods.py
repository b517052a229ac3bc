"""The whole path in pods: the chart's operator and gateway, a llama.cpp model server, and
Agents, on a real node, with ankka's own images.

Runtimes in pods serve mTLS only (kubelet probes their plain probe port). The tests reach
them as a platform identity of their own (``Cluster.call``, tests/pods/conftest.py), checking
the runtime's certificate against the platform CA and the Service's DNS name
(``<agent>.shop.svc``, sent as SNI to the Service's cluster IP). A Task is handed to its
runtime pod by the operator pod, over mTLS.

The tests run in order and share the cluster: each step builds on the one before (pytest runs
a module's tests in file order).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from tests.pods.conftest import PLATFORM_NS, Cluster
from tests.pods.manifests import (
    MODEL,
    NS,
    QUESTION,
    TASK_RESULT,
    agent,
    installation_model,
    standin,
    task,
    task_agent,
)
from tests.support.eventually import eventually


def phase(cluster: Cluster, name: str) -> str | None:
    body = cluster.kubectl.get("agent", name, NS)
    return ((body or {}).get("status") or {}).get("phase")


def wait_phase(cluster: Cluster, name: str, wanted: str, *, timeout: float = 60) -> None:
    eventually(
        lambda: phase(cluster, name) == wanted, what=f"Agent {name} {wanted}", timeout=timeout
    )


def service_url(cluster: Cluster, name: str) -> str:
    svc = cluster.kubectl.get("service", name, NS)
    assert svc is not None, f"no Service {NS}/{name}"
    return f"https://{svc['spec']['clusterIP']}:443"


def call(cluster: Cluster, name: str, method: str, path: str, **kw: Any) -> httpx.Response:
    """A request to the runtime of Agent ``name``, through its Service, over mTLS."""
    return cluster.call(NS, name, method, path, timeout=180, **kw)


def ask(cluster: Cluster, agent_name: str, session: str) -> httpx.Response:
    """One turn, through the agent's Service (kube-proxy) to its runtime pod."""
    return call(
        cluster, agent_name, "POST", f"/v1/agents/{agent_name}/sessions/{session}", json=QUESTION
    )


def answered(cluster: Cluster, session: str) -> httpx.Response | None:
    try:
        response = ask(cluster, "chat", session)
    except httpx.TransportError:
        return None
    return response if response.status_code == 200 else None


def gateway_metrics(cluster: Cluster, name: str) -> str:
    """The lines of one gateway metric, from its plain health port through its Service."""
    svc = cluster.kubectl.get("service", "ankka-gateway", PLATFORM_NS)
    assert svc is not None
    text = httpx.get(f"http://{svc['spec']['clusterIP']}:9090/metrics", timeout=30).text
    return "\n".join(line for line in text.splitlines() if f"ankka_gateway_{name}" in line)


def runtime_pod(cluster: Cluster, name: str) -> dict[str, Any]:
    (pod,) = cluster.ready_pods(NS, f"app.kubernetes.io/instance={name}")
    return pod


def test_the_chart_runs_the_operator_and_the_gateway_as_pods(
    cluster: Cluster, helm_release: str
) -> None:
    cluster.wait_ready("the operator pod", PLATFORM_NS, "app.kubernetes.io/name=ankka-operator")
    cluster.wait_ready("the gateway pod", PLATFORM_NS, "app.kubernetes.io/name=ankka-gateway")
    # The operator in its pod reached the API server through the kubernetes Service.
    assert cluster.kubectl.get("secret", "ankka-gateway-tls", PLATFORM_NS) is not None


def test_agents_are_held_until_the_model_pod_is_served(cluster: Cluster) -> None:
    cluster.kubectl.run("create", "namespace", NS)
    cluster.apply(agent("weather", "examples.weather"))
    cluster.apply(agent("chat", "chat_agent"))
    wait_phase(cluster, "weather", "Held")
    assert cluster.kubectl.get("deployment", "weather", NS)["spec"]["replicas"] == 0  # type: ignore[index]

    cluster.apply(installation_model())
    cluster.wait_ready("the llama.cpp pod", NS, f"app.kubernetes.io/instance={MODEL}")
    eventually(
        lambda: (
            "True"
            in json.dumps(
                [
                    c
                    for c in (cluster.kubectl.get("installationmodel", MODEL, NS) or {})
                    .get("status", {})
                    .get("conditions", [])
                    if c["type"] == "Served"
                ]
            )
        ),
        what="smollm Served",
        timeout=120,
    )
    for name in ("weather", "chat"):
        # Ready means the runtime pod is available (issue 27): a pod started at load average
        # 22-24 took past 60 s.
        wait_phase(cluster, name, "Ready", timeout=240)
        cluster.wait_ready(f"{name}'s runtime pod", NS, f"app.kubernetes.io/instance={name}")


def test_the_model_pod_s_log_says_how_its_server_started(cluster: Cluster) -> None:
    # The llama-server image's entrypoint (ankka's start fallback) says which way it took:
    # as built here (no AMX); with --no-repack, and why, on a node that refuses AMX.
    (pod,) = cluster.ready_pods(NS, f"app.kubernetes.io/instance={MODEL}")
    out = cluster.kubectl.run("logs", pod["metadata"]["name"], "-n", NS).stdout
    started = [line for line in out.splitlines() if "llama-server started" in line]
    assert started, out[-3000:]
    assert started[0].startswith("[ankka llama-server start] llama-server started "), started
    assert started[0].endswith("as built") or "--no-repack: as built it died of" in started[0]


def test_the_real_model_answers_an_agent_pod_through_the_gateway_over_mtls(
    cluster: Cluster,
) -> None:
    response = eventually(
        lambda: answered(cluster, "first"), what="the chat agent's first answer", timeout=180
    )
    body = response.json()
    assert body["reply"].strip(), body
    assert body["usage"]["output_tokens"] > 0, body
    # The gateway counted it under the runtime's certificate identity: the answer came through
    # it, over mTLS (the runtime's only model address is the gateway's https Service name).
    assert 'caller="shop/chat",model="smollm"' in gateway_metrics(cluster, "requests_total")


def test_the_weather_agent_is_refused_tools_the_model_cannot_call(cluster: Cluster) -> None:
    # SmolLM2's chat template has no tool calling (llama.cpp's /props says so). The runtime
    # asks the gateway for the model's capabilities (/api/show, over mTLS) and refuses the
    # weather agent's turn, which declares get_weather, before any chat request is sent.
    response = ask(cluster, "weather", "w1")
    assert 400 <= response.status_code < 600, response.text
    assert "tools" in response.text, response.text
    assert 'caller="shop/weather"' not in gateway_metrics(cluster, "requests_total")


def test_kubectl_logs_reads_a_runtime_pod(cluster: Cluster) -> None:
    pod = runtime_pod(cluster, "chat")["metadata"]["name"]
    out = cluster.kubectl.run("logs", pod, "-n", NS)
    assert "ankka serve: listening on https://0.0.0.0:8080" in out.stdout, out.stdout
    assert "ankka serve: probes on http://0.0.0.0:8081" in out.stdout, out.stdout


def test_a_runtime_pod_admits_no_caller_without_a_platform_certificate(cluster: Cluster) -> None:
    try:
        status: int | None = httpx.get(
            f"{service_url(cluster, 'chat')}/v1/sessions/first", verify=False, timeout=30
        ).status_code
    except httpx.HTTPError:
        status = None  # refused in the handshake
    assert status in (None, 401)


def test_certificates_renew_with_the_pods_running(cluster: Cluster) -> None:
    pod = runtime_pod(cluster, "chat")
    secret = cluster.kubectl.get("secret", "chat-tls", NS)
    assert secret is not None
    first = secret["data"]["tls.crt"]
    eventually(
        lambda: (cluster.kubectl.get("secret", "chat-tls", NS) or {})["data"]["tls.crt"] != first,
        what="chat's certificate renewed",
        timeout=120,
        interval=1,
    )
    renewed = base64.b64decode(cluster.kubectl.get("secret", "chat-tls", NS)["data"]["tls.crt"])  # type: ignore[index]
    assert renewed
    # The kubelet refreshes the mounted Secret; the runtime reloads it: same pod, no restart.
    assert eventually(
        lambda: answered(cluster, "renewed"), what="an answer after renewal", timeout=180
    )
    after = runtime_pod(cluster, "chat")
    assert after["metadata"]["uid"] == pod["metadata"]["uid"]
    assert after["status"]["containerStatuses"][0]["restartCount"] == 0


def test_an_applied_task_is_handed_to_its_runtime_pod_by_the_operator_pod_over_mtls(
    cluster: Cluster,
) -> None:
    # The model is a stand-in pod (SmolLM2 calls no tools, and a task ends through a tool).
    for doc in standin():
        cluster.apply(doc)
    cluster.wait_ready("the stand-in model pod", NS, "app.kubernetes.io/instance=standin")
    cluster.apply(task_agent())
    wait_phase(cluster, "research", "Ready", timeout=240)
    cluster.wait_ready("research's runtime pod", NS, "app.kubernetes.io/instance=research")
    cluster.apply(task("summary-1"))
    status = eventually(
        lambda: (
            (s := ((cluster.kubectl.get("task", "summary-1", NS) or {}).get("status") or {})).get(
                "phase"
            )
            == "Completed"
            and s
        ),
        what="the Task to complete",
        timeout=180,
        interval=1,
    )
    assert status["result"] == TASK_RESULT
    assert status["iterationsUsed"] == 2 and status["iterationBudget"] == 5
    assert status["tokens"]["output"] == 54 and status["tokens"]["input"] > 0
    handed = next(c for c in status["conditions"] if c["type"] == "Handed")
    assert handed["status"] == "True"
    assert "https://research.shop.svc:443" in handed["message"]
    # The runtime pod recorded who handed it: the operator pod's own identity.
    record = call(cluster, "research", "GET", f"/v1/tasks/{status['runtimeTask']}").json()
    assert record["state"] == "completed"
    assert record["created_by"] == "ankka://platform/operator"


def wait_replaced(cluster: Cluster, what: str, selector: str, old: dict[str, Any]) -> None:
    eventually(
        lambda: [
            p
            for p in cluster.ready_pods(PLATFORM_NS, selector)
            if p["metadata"]["uid"] != old["metadata"]["uid"]
        ],
        what=f"a new {what} pod Ready",
        timeout=180,
        interval=1,
    )


def test_the_gateway_pod_deleted_and_recreated_answers_again(cluster: Cluster) -> None:
    selector = "app.kubernetes.io/name=ankka-gateway"
    (old,) = cluster.ready_pods(PLATFORM_NS, selector)
    cluster.kubectl.run("delete", "pod", old["metadata"]["name"], "-n", PLATFORM_NS, "--wait=false")
    wait_replaced(cluster, "gateway", selector, old)
    assert eventually(
        lambda: answered(cluster, "regw"), what="an answer through the new gateway", timeout=180
    )


def test_the_operator_pod_killed_converges_without_duplicates(cluster: Cluster) -> None:
    selector = "app.kubernetes.io/name=ankka-operator"
    (old,) = cluster.ready_pods(PLATFORM_NS, selector)
    cluster.kubectl.run(
        "delete", "pod", old["metadata"]["name"], "-n", PLATFORM_NS,
        "--grace-period=0", "--force",
    )  # fmt: skip
    cluster.apply(agent("late", "chat_agent"))  # applied while no operator runs
    wait_replaced(cluster, "operator", selector, old)
    wait_phase(cluster, "late", "Ready", timeout=120)
    cluster.wait_ready("late's runtime pod", NS, "app.kubernetes.io/instance=late")
    for name in ("weather", "chat", "late"):
        deployments = cluster.kubectl.items("deployments", NS, f"app.kubernetes.io/instance={name}")
        assert len(deployments) == 1, name
        assert len(cluster.ready_pods(NS, f"app.kubernetes.io/instance={name}")) == 1, name


@pytest.mark.parametrize("name", ["late"])
def test_deleting_an_agent_removes_its_pods(cluster: Cluster, name: str) -> None:
    cluster.kubectl.run("delete", "agent", name, "-n", NS, "--wait=false")
    eventually(
        lambda: not cluster.pods(NS, f"app.kubernetes.io/instance={name}"),
        what=f"{name}'s pods gone",
        timeout=180,
        interval=1,
    )
    assert cluster.kubectl.get("deployment", name, NS) is None
    assert cluster.kubectl.get("secret", f"{name}-tls", NS) is None
