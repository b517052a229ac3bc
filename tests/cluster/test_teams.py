"""Team resources end to end: a ``Team`` applied against the real API server, the operator
reading its backlog from an ``ankka serve`` runtime, and the counts read back with kubectl as
the items progress.

As in test_tasks.py, pods do not run in this control plane: the runtime (examples/newsroom.py,
its team ``newsroom``) runs on loopback with the Agent's own certificate, and the Agent names
it with ``spec.runtime.address``. The items are put over mTLS as a platform identity of the
tests'; the operator lists them as ``ankka://platform/operator`` with the chart's RBAC only.
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
from tests.cluster.conftest import Kubectl, Operator
from tests.cluster.controlplane import ControlPlane
from tests.support.eventually import eventually
from tests.support.processes import Server, ankka_command, start

NS = "newsroom"
SUMMARY = {"title": "sqlite", "points": ["SQLite is an embedded database kept in one file."]}
DRAFT = {"title": "One file", "body": "SQLite keeps a whole database in one file."}
# The researcher's first call is held, so the item stays claimed (and the draft waiting on it)
# while the operator reads the backlog; then the summary, the draft, and a failed summary.
SCRIPT = [
    {
        "when": "user",
        "delay_ms": 20_000,
        "tool_calls": [{"name": "lookup", "arguments": {"topic": "sqlite"}}],
    },
    {"when": "tool", "tool_calls": [{"name": "complete_task", "arguments": SUMMARY}]},
    {"when": "user", "tool_calls": [{"name": "complete_task", "arguments": DRAFT}]},
    {"when": "user", "tool_calls": [{"name": "fail_task", "arguments": {"reason": "no idea"}}]},
]
COLUMNS = ["NAME", "AGENT", "PHASE", "READY", "CLAIMED", "DONE", "FAILED", "ITERATIONS", "AGE"]


class Desk:
    def __init__(self, kubectl: Kubectl, runtime: Server, workdir: Path, client: httpx.Client):
        self.kubectl = kubectl
        self.runtime = runtime
        self.workdir = workdir
        self.client = client

    def apply(self, *objects: dict[str, Any]) -> None:
        path = self.workdir / "objects.yaml"
        path.write_text(yaml.safe_dump_all(objects))
        self.kubectl.run("apply", "-f", str(path))

    def put(self, item: str, **body: Any) -> None:
        answer = self.client.put(f"{self.runtime.url}/v1/teams/newsroom/items/{item}", json=body)
        assert answer.status_code == 201, answer.text

    def status_of(self, name: str) -> dict[str, Any]:
        status: dict[str, Any] = (self.kubectl.get("team", name, NS) or {}).get("status") or {}
        return status

    def counts_become(self, name: str, what: str, **counts: int) -> dict[str, Any]:
        want = {s: 0 for s in ("waiting", "ready", "claimed", "completed", "failed", "cancelled")}
        want.update(counts)
        return eventually(
            lambda: (s := self.status_of(name)).get("counts") == want and s,
            what=what,
            timeout=90,
        )

    def phase_becomes(self, name: str, phase: str, what: str) -> dict[str, Any]:
        return eventually(
            lambda: (s := self.status_of(name)).get("phase") == phase and s, what=what, timeout=60
        )

    def row(self, name: str) -> tuple[list[str], list[str]]:
        table = self.kubectl.run("get", "teams", "-n", NS).stdout.splitlines()
        return table[0].split(), next(r for r in table if r.split()[0] == name).split()


def team(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Team",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"agent": "newsroom", **spec},
    }


def agent(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": "newsroom", "namespace": NS},
        "spec": {"image": "registry.example/newsroom:1", "module": "examples.newsroom", **spec},
    }


@pytest.fixture(scope="module")
def desk(kubectl: Kubectl, operator: Operator, controlplane: ControlPlane) -> Iterator[Desk]:
    workdir = controlplane.workdir / "newsroom"
    workdir.mkdir(exist_ok=True)
    script = workdir / "script.json"
    script.write_text(json.dumps(SCRIPT))
    model = start(ankka_command("standin", "--script", str(script), "--port", "0"))
    env = {
        "ANKKA_MODEL_DEFAULT_PRESET": "openai-compatible",
        "ANKKA_MODEL_DEFAULT_URL": f"{model.url}/v1",
        "ANKKA_MODEL_DEFAULT_MODEL": "standin",
    }
    kubectl.run("create", "namespace", NS, check=False)
    objects = workdir / "agent.yaml"
    objects.write_text(yaml.safe_dump(agent()))
    kubectl.run("apply", "-f", str(objects))
    with MountedSecret(kubectl, NS, "newsroom-tls", workdir / "newsroom-tls") as mounted:
        command = ankka_command("serve", "examples.newsroom:service", "--port", "0")
        store = ["--store", f"sqlite:///{workdir / 'newsroom.sqlite3'}"]
        runtime = start([*command, "--tls-dir", str(mounted.directory), *store], env=env)
        assert runtime.url.startswith("https://127.0.0.1:"), runtime.url
        here = Desk(kubectl, runtime, workdir, platform_client(kubectl, workdir / "tests"))
        here.apply(agent(runtime={"address": runtime.url}))
        eventually(
            lambda: (
                (kubectl.get("agent", "newsroom", NS) or {}).get("status", {}).get("phase")
                == "Progressing"
            ),
            what="the newsroom Agent rendered (no pods in this tier: Progressing)",
            timeout=60,
        )
        yield here
        here.client.close()
        runtime.stop()
        model.stop()


def test_kubectl_get_teams_shows_the_backlog_s_counts_as_its_items_progress(desk: Desk) -> None:
    desk.apply(team("newsroom"))
    status = desk.counts_become("newsroom", "the empty backlog read")
    assert status["phase"] == "Active" and status["team"] == "newsroom" and status["items"] == 0
    served = [c for c in status["conditions"] if c["type"] == "Served"]
    # Read from the runtime's summary (counted in its store), not its listing.
    assert served and served[0]["status"] == "True" and served[0]["reason"] == "Summarised"
    assert status["observedGeneration"] == 1 and "reason" not in status
    assert status["budget"]["iterations"] == {"limit": 40, "used": 0, "reserved": 0}
    header, row = desk.row("newsroom")
    assert header == COLUMNS
    assert row[1:8] == ["newsroom", "Active", "0", "0", "0", "0", "0"]

    desk.put("sqlite", type="summary", instructions="Summarise sqlite.")
    desk.put("draft-1", type="draft", instructions="Write it up.", depends_on=["sqlite"])
    # The researcher holds the summary (its first model call is slow); the draft waits on it.
    desk.counts_become("newsroom", "the summary claimed, the draft waiting", claimed=1, waiting=1)
    assert desk.row("newsroom")[1][1:7] == ["newsroom", "Active", "0", "1", "0", "0"]
    wide = desk.kubectl.run("get", "teams", "-n", NS, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-6:] == ["TEAM", "TOKENS", "WAITING", "CANCELLED", "REASON", "AGE"]

    desk.counts_become("newsroom", "the summary and the draft done", completed=2)
    desk.put("postgres", type="summary", instructions="Summarise postgres.")
    status = desk.counts_become("newsroom", "the second summary failed", completed=2, failed=1)
    assert status["items"] == 3
    # What the runtime says of the same backlog (the operator's counts and budget are its).
    listing = desk.client.get(f"{desk.runtime.url}/v1/teams/newsroom/items").json()
    assert listing["counts"] == {"completed": 2, "failed": 1}
    summary = desk.client.get(f"{desk.runtime.url}/v1/teams/newsroom/summary").json()
    used = summary["budget"]["iterations"]["used"]
    tasks = [desk.client.get(f"{desk.runtime.url}/v1/tasks/{i['task']}") for i in listing["items"]]
    assert used == sum(t.json()["iterations"]["used"] for t in tasks) > 0
    shown = {  # (an unlimited budget has no limit in the status)
        kind: {k: v for k, v in allowance.items() if v is not None}
        for kind, allowance in summary["budget"].items()
    }
    assert status["budget"] == shown
    assert desk.row("newsroom")[1][1:8] == ["newsroom", "Active", "0", "0", "2", "1", str(used)]


def test_a_team_the_runtime_does_not_serve_fails_naming_those_it_does(desk: Desk) -> None:
    desk.apply(team("sports", team="sports-desk"))
    status = desk.phase_becomes(
        "sports", "Failed", "the Team naming a team the module lacks to fail"
    )
    served = next(c for c in status["conditions"] if c["type"] == "Served")
    assert served["status"] == "False" and served["reason"] == "TeamNotServed"
    assert "'sports-desk'" in status["reason"] and "newsroom" in status["reason"]
    assert status["team"] == "sports-desk" and status["items"] == 0
    # Fixed in place (the spec names the module's team): Active, with its counts.
    desk.apply(team("sports", team="newsroom"))
    status = desk.phase_becomes("sports", "Active", "the fixed Team to turn Active")
    assert status["observedGeneration"] == 2 and "reason" not in status
    listing = desk.client.get(f"{desk.runtime.url}/v1/teams/newsroom/items").json()
    assert status["items"] == len(listing["items"]) == sum(status["counts"].values())


def test_a_team_of_a_missing_agent_waits_for_it(desk: Desk) -> None:
    desk.apply(team("ghost", agent="nobody"))
    status = desk.phase_becomes("ghost", "Waiting", "the Team of a missing Agent to wait")
    served = next(c for c in status["conditions"] if c["type"] == "Served")
    assert served["reason"] == "AgentNotFound" and "'nobody'" in status["reason"]
