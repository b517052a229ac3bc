"""An Agent's ``spec.store`` against the real API server: the CRD's rules refuse a store that
names no one thing, the operator refuses SQLite with several replicas saying why, and the
chart renders the shared PostgreSQL for the operator (its settings and the one Secret it may
read). The pods tier runs replicas on PostgreSQL for real (tests/pods/test_workload.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cluster.conftest import Kubectl, Operator
from tests.cluster.controlplane import ControlPlane
from tests.cluster.test_chart_pods import rendered
from tests.support.eventually import eventually

NS = "store-lab"


@pytest.fixture(scope="module")
def lab(kubectl: Kubectl, operator: Operator) -> str:
    kubectl.run("create", "namespace", NS)
    return NS


def agent(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"image": "registry.example/shop/cart:1", "module": "shop.cart", **spec},
    }


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (
            {"store": {"sqlite": {}, "postgres": {"secretName": "db"}}},
            "a store is sqlite or postgres, not both",
        ),
        (
            {
                "store": {
                    "postgres": {"secretName": "db", "dsnSecretRef": {"name": "db", "key": "uri"}}
                }
            },
            "give dsnSecretRef (a DSN) or secretName (its parts), not both",
        ),
        ({"store": {"postgres": {"sslMode": "require"}}}, "give dsnSecretRef"),
        (
            {"env": [{"name": "X", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]},
            "an env entry has a value or a valueFrom, not both",
        ),
        ({"resources": {"limits": {"nvidia.com/gpu": "lots"}}}, "spec.resources.limits"),
    ],
    ids=["sqlite-and-postgres", "dsn-and-parts", "postgres-naming-nothing", "env-both", "quantity"],
)
def test_the_api_server_refuses_a_store_or_env_that_names_no_one_thing(
    lab: str, kubectl: Kubectl, spec: dict[str, Any], words: str
) -> None:
    out = kubectl.run("apply", "-f", "-", check=False, stdin=json.dumps(agent("bad", **spec)))
    assert out.returncode != 0, out.stdout
    assert words in out.stderr, out.stderr


def test_sqlite_with_two_replicas_fails_the_agent_saying_why_and_runs_nothing(
    lab: str, kubectl: Kubectl
) -> None:
    kubectl.run("apply", "-f", "-", stdin=json.dumps(agent("twins", replicas=2)))

    def failed() -> dict[str, Any]:
        body = kubectl.get("agent", "twins", NS)
        assert body is not None and (body.get("status") or {}).get("phase") == "Failed"
        return body

    body = eventually(failed, what="twins Failed")
    rendered = {c["type"]: c for c in body["status"]["conditions"]}["Rendered"]
    assert (rendered["status"], rendered["reason"]) == ("False", "SqliteNeedsOneReplica")
    assert "each pod would keep sessions of its own" in rendered["message"]
    assert "spec.store.postgres" in rendered["message"]
    assert kubectl.get("deployment", "twins", NS) is None
    # Given a PostgreSQL, the same Agent renders.
    kubectl.run(
        "apply", "-f", "-",
        stdin=json.dumps(agent("twins", replicas=2, store={"postgres": {"secretName": "db"}})),
    )  # fmt: skip
    eventually(lambda: kubectl.get("deployment", "twins", NS), what="twins' Deployment")


def test_the_chart_points_the_operator_at_a_shared_postgres(controlplane: ControlPlane) -> None:
    docs = rendered(
        controlplane,
        "--set", "store.postgres.secretName=ankka-postgres",
        "--set", "store.postgres.sslMode=require",
    )  # fmt: skip
    (operator,) = [
        d for d in docs if d["kind"] == "Deployment" and "operator" in d["metadata"]["name"]
    ]
    env = {
        e["name"]: e.get("value")
        for e in operator["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["ANKKA_OPERATOR_STORE_SECRET"] == "ankka-postgres"
    assert env["ANKKA_OPERATOR_STORE_SSL_MODE"] == "require"
    (role,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "ankka-operator"]
    secrets = [r for r in role["rules"] if "secrets" in r["resources"]]
    (rule,) = secrets
    assert rule["verbs"] == ["get"]
    assert rule["resourceNames"] == ["ankka-ca", "ankka-gateway-tls", "ankka-postgres"]
