"""A team across two Agents' pods (issue 25, "Cluster/pods tier"; docs/teams.md), on the real
node: two Agent resources, ``newsroom`` and ``newsroom-2``, each one pod of ankka's image
serving ``examples/newsroom.py``, both with their store in one schema of the tier's PostgreSQL
(``spec.store.postgres.schema``), so both runtimes serve the one ``newsroom`` team over one
backlog. A team's members are the runtime processes of one service sharing its store; nothing
ties them to one Agent resource, and the ``Team`` resource names the Agent it is read through.

The backlog is put over HTTP (mTLS, through ``newsroom``'s Service): a summary of sqlite, which
one pod's researcher claims and whose second model call the stand-in holds; then a summary of
postgresql, which the other pod's researcher must claim (one claim per member instance at a
time, and each process runs one researcher instance), and a draft depending on both. The pod
holding sqlite has its runtime container SIGKILLed through containerd (no shutdown: its claim
is still held); once the claim has run out the item comes back to the backlog and another
process's researcher finishes it from its journal. Checked: every item ends once, completed;
the claims (``ankka_team_claims``) were made by both pods; no recorded model call is asked
again (the stand-in's log against the journal); the ``Team`` resource's status counts the
backlog midway and at the end, as ``kubectl get teams`` shows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from functools import partial
from typing import Any

import httpx
import psycopg
import pytest

from tests.integration.tasks_crash import asked_keys, recorded_keys
from tests.pods.conftest import Cluster, image
from tests.pods.manifests import NS, STANDIN_PORT, standin
from tests.support.eventually import eventually

AGENTS = ("newsroom", "newsroom-2")  # the Agent resources; the Team is read through the first
TEAM = "newsroom"
MODEL = "newsroom-model"  # the stand-in these tests script
SCHEMA = "newsroom_team"  # both Agents' store: one schema, so one backlog
HELD_MS = 120_000  # sqlite's second call: held far longer than the kill takes
TOPICS = ("sqlite", "postgresql")
DRAFT = {"title": "Two databases", "body": "SQLite is one file; PostgreSQL is a server."}
FINAL = ("completed", "failed", "cancelled")


def task_of(item: str) -> str:
    return f"team:{TEAM}:{item}"


def summary(topic: str) -> dict[str, Any]:
    return {"title": topic, "points": [f"What {topic} is."]}


def script() -> list[dict[str, Any]]:
    """Each summary looks its topic up, then completes; sqlite's completion is held, and a
    spare answers it when the kill has cut it off (first fit: the spare comes after)."""

    def turn(item: str, when: str, call: dict[str, Any], **more: Any) -> dict[str, Any]:
        return {"when": when, "contains": f"Task {task_of(item)} (type", "tool_calls": [call],
                "usage": {"input_tokens": 100, "output_tokens": 10}, **more}  # fmt: skip

    def complete(result: dict[str, Any]) -> dict[str, Any]:
        return {"name": "complete_task", "arguments": result}

    lookups = [turn(t, "user", {"name": "lookup", "arguments": {"topic": t}}) for t in TOPICS]
    return [
        *lookups,
        turn("sqlite", "tool", complete(summary("sqlite")), delay_ms=HELD_MS),
        turn("sqlite", "tool", complete(summary("sqlite"))),  # the spare
        turn("postgresql", "tool", complete(summary("postgresql"))),
        turn("draft-1", "user", complete(DRAFT)),
    ]


def model_url(cluster: Cluster) -> str:
    svc = cluster.kubectl.get("service", MODEL, NS)
    assert svc is not None, f"no Service {NS}/{MODEL}"
    return f"http://{svc['spec']['clusterIP']}:{STANDIN_PORT}"


def model_requests(cluster: Cluster) -> list[dict[str, Any]]:
    got = httpx.get(f"{model_url(cluster)}/_standin/requests", timeout=30)
    got.raise_for_status()
    return [r for r in got.json()["requests"] if r["path"] == "/v1/chat/completions"]


def store_dsn(cluster: Cluster) -> str:
    """The Agents' store from the test process (loopback, trusted), in their schema."""
    return f"{cluster.postgres.local}?options=-csearch_path%3D{SCHEMA}"


def claims(cluster: Cluster) -> list[tuple[str, int, str, str, str]]:
    """Every claim made: (item, number, agent, instance, the pod its process ran in)."""
    with psycopg.connect(store_dsn(cluster)) as conn:
        rows = conn.execute(
            "SELECT item, number, agent, instance, owner FROM ankka_team_claims "
            "WHERE team = %s ORDER BY item, number",
            (TEAM,),
        ).fetchall()
    # A process's lease owner is ``<hostname>:<pid>:<nonce>``; a pod's hostname is its name.
    return [(r[0], int(r[1]), r[2], r[3], str(r[4]).split(":")[0]) for r in rows]


def agent(name: str) -> dict[str, Any]:
    model = {
        "name": "default",
        "preset": "openai-compatible",
        "address": f"http://{MODEL}.{NS}.svc:{STANDIN_PORT}/v1",
        "model": "standin",
    }
    store = {"dsnSecretRef": {"name": "newsroom-db", "key": "uri"}, "schema": SCHEMA}
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"image": image("weather"), "module": "examples.newsroom", "replicas": 1,
                 "models": [model], "store": {"postgres": store}},
    }  # fmt: skip


def team_resource() -> dict[str, Any]:
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Team",
        "metadata": {"name": TEAM, "namespace": NS},
        "spec": {"agent": AGENTS[0], "team": TEAM},
    }


def pod_of(cluster: Cluster, name: str) -> dict[str, Any]:
    (pod,) = cluster.ready_pods(NS, f"app.kubernetes.io/instance={name}")
    return pod


def serves(cluster: Cluster, name: str) -> bool:
    try:
        answer = cluster.call(NS, name, "GET", f"/v1/teams/{TEAM}/items")
    except httpx.TransportError as exc:
        raise AssertionError(f"{name}: {exc}") from exc
    assert answer.status_code == 200, answer.text
    return True


@pytest.fixture(scope="module")
def newsroom(cluster: Cluster, helm_release: str) -> Iterator[None]:
    cluster.kubectl.run("create", "namespace", NS, check=False)  # test_pods.py's, if it ran
    for doc in standin(name=MODEL):
        cluster.apply(doc)
    cluster.wait_ready("the newsroom's stand-in model", NS, f"app.kubernetes.io/instance={MODEL}")
    cluster.kubectl.run(
        "create", "secret", "generic", "newsroom-db", "-n", NS,
        f"--from-literal=uri={cluster.postgres.dsn()}",
    )  # fmt: skip
    for name in AGENTS:
        cluster.apply(agent(name))
    cluster.apply(team_resource())
    for name in AGENTS:
        done = cluster.kubectl.run(
            "wait", "--for=condition=Ready", f"agent/{name}", "-n", NS, "--timeout=240s",
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, (name, done.stdout, done.stderr, cluster.why(
            NS, f"app.kubernetes.io/instance={name}"
        ))  # fmt: skip
        # kube-proxy follows a rollout's endpoints in its own time.
        eventually(partial(serves, cluster, name), what=f"{name}'s Service", timeout=120)
    yield
    cluster.kubectl.run("delete", "team", TEAM, "-n", NS, "--wait=false")
    for name in (*AGENTS, MODEL):
        kind = "deployment" if name == MODEL else "agent"
        cluster.kubectl.run("delete", kind, name, "-n", NS, "--wait=false")


def put(cluster: Cluster, item: str, **body: Any) -> None:
    answer = cluster.call(NS, AGENTS[0], "PUT", f"/v1/teams/{TEAM}/items/{item}", json=body)
    assert answer.status_code == 201, answer.text


def item(cluster: Cluster, via: str, name: str, wait: int = 0) -> dict[str, Any]:
    """The item as ``via``'s runtime reads it; ``wait``: until it ends, at most that long."""
    path = f"/v1/teams/{TEAM}/items/{name}" + (f"?wait={wait}" if wait else "")
    answer = cluster.call(NS, via, "GET", path, timeout=wait + 30)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def team_status(cluster: Cluster) -> dict[str, Any]:
    status: dict[str, Any] = (cluster.kubectl.get("team", TEAM, NS) or {}).get("status") or {}
    return status


def counts_become(cluster: Cluster, what: str, **counts: int) -> dict[str, Any]:
    want = dict.fromkeys(("waiting", "ready", "claimed", "completed", "failed", "cancelled"), 0)
    want.update(counts)
    return eventually(
        lambda: (s := team_status(cluster)).get("counts") == want and s,
        what=f"the Team's status: {what}",
        timeout=90,
        interval=1,
        detail=lambda: str(team_status(cluster)),
    )


def asked(cluster: Cluster, task: str, messages: int) -> bool:
    return (task, messages) in asked_keys(model_requests(cluster))


def sigkill(cluster: Cluster, pod: dict[str, Any]) -> None:
    """SIGKILL the pod's runtime process through containerd: no shutdown, nothing released
    (the kubelet then starts the container again, a new process with a new lease owner)."""
    (runtime,) = [s for s in pod["status"]["containerStatuses"] if s["name"] == "runtime"]
    container = runtime["containerID"].removeprefix("containerd://")
    killed = cluster.node.ctr("tasks", "kill", "--signal", "SIGKILL", container, timeout=30)
    assert killed.returncode == 0, killed.stderr


def test_a_team_across_two_agents_pods_finishes_its_backlog_through_a_killed_member(
    cluster: Cluster, newsroom: None
) -> None:
    answer = httpx.put(f"{model_url(cluster)}/_standin/script", json=script(), timeout=30)
    assert answer.status_code < 300, answer.text
    httpx.delete(f"{model_url(cluster)}/_standin/requests", timeout=30).raise_for_status()
    pods = {p["metadata"]["name"]: p for p in (pod_of(cluster, name) for name in AGENTS)}

    put(cluster, "sqlite", type="summary", instructions="Summarise sqlite.")
    eventually(
        lambda: item(cluster, AGENTS[0], "sqlite")["state"] == "claimed",
        what="sqlite claimed",
        timeout=60,
    )
    # That pod's one researcher instance holds sqlite: postgresql goes to the other pod's.
    put(cluster, "postgresql", type="summary", instructions="Summarise postgresql.")
    put(cluster, "draft-1", type="draft", instructions="Write both up.",
        depends_on=list(TOPICS))  # fmt: skip
    eventually(
        partial(asked, cluster, task_of("sqlite"), 2),
        what="sqlite's second call held by the stand-in",
        timeout=120,
    )
    done = item(cluster, AGENTS[0], "postgresql", wait=60)
    assert done["state"] == "completed", done
    made = claims(cluster)
    by_item = {(c[0], c[1]): c for c in made}
    victim_pod = by_item[("sqlite", 1)][4]
    assert {victim_pod, by_item[("postgresql", 1)][4]} == set(pods), made  # both pods claimed
    first_instance = item(cluster, AGENTS[0], "sqlite")["claimed_by"]["instance"]
    assert by_item[("sqlite", 1)][3] == first_instance
    counts_become(cluster, "sqlite claimed, postgresql done, the draft waiting",
                  claimed=1, completed=1, waiting=1)  # fmt: skip

    sigkill(cluster, pods[victim_pod])
    recorded = recorded_keys(store_dsn(cluster))
    before = len(model_requests(cluster))
    survivor = next(p for name, p in pods.items() if name != victim_pod)
    via = survivor["metadata"]["labels"]["app.kubernetes.io/instance"]

    def ended(name: str) -> dict[str, Any]:
        record = item(cluster, via, name, wait=20)
        assert record["state"] in FINAL, record
        return record

    records = {
        name: eventually(partial(ended, name), what=f"{name} ended", timeout=240, interval=1)
        for name in ("sqlite", "draft-1", "postgresql")
    }
    assert {n: r["state"] for n, r in records.items()} == dict.fromkeys(records, "completed")
    assert records["sqlite"]["result"] == summary("sqlite")
    assert records["draft-1"]["result"] == DRAFT
    # The killed member's item came back once and was finished by another process's
    # researcher (the other pod's, or the killed pod's runtime started again).
    again = records["sqlite"]
    assert again["claims"] == 2, again
    assert again["claimed_by"]["agent"] == "researcher"
    assert again["claimed_by"]["instance"] != first_instance, again
    made = claims(cluster)
    assert [(c[0], c[1]) for c in made] == [
        ("draft-1", 1), ("postgresql", 1), ("sqlite", 1), ("sqlite", 2)
    ], made  # fmt: skip
    with psycopg.connect(store_dsn(cluster)) as conn:
        ends = conn.execute(
            "SELECT id, state FROM ankka_tasks WHERE id LIKE %s ORDER BY id", (f"team:{TEAM}:%",)
        ).fetchall()
    assert ends == [(task_of(i), "completed") for i in ("draft-1", "postgresql", "sqlite")]

    # No recorded model call asked again: every call asked once, and its answer recorded,
    # but sqlite's held one, which the kill cut off unanswered and its new claimant asked.
    requests = model_requests(cluster)
    cut_off = (task_of("sqlite"), 2)
    assert cut_off not in recorded
    repeated = sorted(set(asked_keys(requests[before:])) & recorded)
    assert repeated == [], f"recorded calls asked again after the kill: {repeated}"
    final = recorded_keys(store_dsn(cluster))
    assert Counter(asked_keys(requests)) == Counter([*final, cut_off]), requests

    # The Team resource counts the backlog, read through newsroom's runtime (the shared store).
    status = counts_become(cluster, "every item completed", completed=3)
    assert status["phase"] == "Active" and status["items"] == 3, status
    summary_read = cluster.call(NS, via, "GET", f"/v1/teams/{TEAM}/summary").json()
    used = summary_read["budget"]["iterations"]["used"]
    assert status["budget"]["iterations"]["used"] == used > 0, (status, summary_read)
    table = cluster.kubectl.run("get", "teams", "-n", NS).stdout.splitlines()
    row = next(r.split() for r in table if r.split()[0] == TEAM)
    assert row[1:8] == [AGENTS[0], "Active", "0", "0", "3", "0", str(used)], table
