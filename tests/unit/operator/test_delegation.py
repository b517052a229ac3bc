"""Who may delegate to whom, rendered from Agents' spec.delegatesTo: the delegating runtime's
ANKKA_PEERS, the named runtime's ANKKA_DELEGATORS and NetworkPolicy, and a Task's tree in its
status (parent, children, the PARENT column)."""

from __future__ import annotations

import json
from typing import Any

from ankka.api.crdgen import crd
from ankka.api.resources import AgentSpec, Task
from ankka.operator import tasks
from ankka.operator.agents import agent_children
from ankka.operator.delegation import delegators_of
from ankka.operator.settings import Settings

SETTINGS = Settings(namespace="platform")


def spec(**fields: Any) -> AgentSpec:
    return AgentSpec.model_validate({"image": "team:1", "module": "team.agents", **fields})


def rendered(name: str, s: AgentSpec, delegators: list[str]) -> dict[str, Any]:
    children = agent_children(
        namespace="team", name=name, uid="u1", spec=s, settings=SETTINGS, held=False,
        delegators=delegators,
    )  # fmt: skip
    return {c["kind"]: c for c in children}


def env(children: dict[str, Any]) -> dict[str, str]:
    (container,) = children["Deployment"]["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container["env"]}


def body(name: str, namespace: str, targets: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"delegatesTo": targets}}


def test_a_delegating_agent_knows_each_agent_the_other_runtime_serves_as_a_peer() -> None:
    lead = spec(delegatesTo=[{"agent": "research", "serves": ["researcher", "fact-checker"]},
                             {"agent": "writer"}])  # fmt: skip
    peers = json.loads(env(rendered("lead", lead, []))["ANKKA_PEERS"])
    assert peers == {
        "researcher": {
            "url": "https://research.team.svc:443",
            "identity": "ankka://service/team/research",
        },
        "fact-checker": {
            "url": "https://research.team.svc:443",
            "identity": "ankka://service/team/research",
        },
        "writer": {"url": "https://writer.team.svc:443", "identity": "ankka://service/team/writer"},
    }
    assert "ANKKA_DELEGATORS" not in env(rendered("lead", lead, []))
    assert "ANKKA_PEERS" not in env(rendered("research", spec(), []))


def test_the_named_agent_lets_its_delegators_in_by_identity_and_by_network() -> None:
    agents = [
        body("lead", "team", [{"agent": "research"}]),
        body("editor", "team", [{"agent": "research"}, {"agent": "writer"}]),
        body("lead", "other", [{"agent": "research"}]),  # another namespace: not this one
        body("research", "team", [{"agent": "research"}]),  # itself: never its own delegator
        body("idle", "team", []),
    ]
    delegators = delegators_of(agents, namespace="team", name="research")
    assert delegators == ["editor", "lead"]
    children = rendered("research", spec(), delegators)
    assert env(children)["ANKKA_DELEGATORS"] == "team/editor,team/lead"
    peers = children["NetworkPolicy"]["spec"]["ingress"][0]["from"][2:]
    assert [p["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] for p in peers] == [
        "editor",
        "lead",
    ]
    assert "ANKKA_DELEGATORS" not in env(rendered("research", spec(), []))


def test_a_tasks_status_shows_its_parent_and_children_and_kubectl_a_parent_column() -> None:
    record = {"id": "r1:1.0", "state": "completed", "parent": "r1",
              "children": [f"r1:1.0:1.{i}" for i in range(70)]}  # fmt: skip
    status = tasks.status_from_record(record)
    assert status["parent"] == "r1"
    assert status["children"] == [f"r1:1.0:1.{i}" for i in range(64)]  # bounded as the CRD is
    root = tasks.status_from_record({"id": "r1", "state": "running", "children": []})
    assert (root["parent"], root["children"]) == (None, [])
    columns = crd(Task)["spec"]["versions"][0]["additionalPrinterColumns"]
    assert {"name": "Parent", "type": "string", "jsonPath": ".status.parent"} in columns
