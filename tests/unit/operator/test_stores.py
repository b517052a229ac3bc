"""An Agent's store (``spec.store``) as the runtime's env and volume, the refusal of SQLite
with several replicas, and the chart's shared PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ankka.api.resources import AgentSpec
from ankka.operator.agents import agent_children, runtime_env
from ankka.operator.settings import Settings
from ankka.operator.stores import (
    agent_schema,
    copied_secret,
    effective_store,
    store_refusal,
)
from ankka.runtime.store.open import sqlite_path

SETTINGS = Settings(namespace="platform")
SHARED = Settings(
    namespace="platform", default_store_secret="pg-app", default_store_ssl_mode="require"
)


def agent(**extra: Any) -> AgentSpec:
    return AgentSpec.model_validate({"image": "i", "module": "m", **extra})


def env_of(spec: AgentSpec, settings: Settings = SETTINGS) -> dict[str, Any]:
    return {
        e["name"]: e.get("value", e.get("valueFrom"))
        for e in runtime_env(spec, settings, namespace="shop", name="cart")
    }


def pod_of(spec: AgentSpec, settings: Settings = SETTINGS) -> dict[str, Any]:
    children = agent_children(
        namespace="shop", name="cart", uid="u1", spec=spec, settings=settings, held=False
    )
    (deployment,) = [c for c in children if c["kind"] == "Deployment"]
    return deployment


def test_without_a_store_the_runtime_keeps_sqlite_on_an_empty_dir() -> None:
    env = env_of(agent())
    assert sqlite_path(env["ANKKA_STORE"]) == "/var/lib/ankka/sessions.sqlite3"
    volumes = pod_of(agent())["spec"]["template"]["spec"]["volumes"]
    assert {"name": "data", "emptyDir": {}} in volumes


def test_sqlite_on_a_claim_keeps_one_writer() -> None:
    deployment = pod_of(agent(store={"sqlite": {"claimName": "cart-sessions"}}))
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "cart-sessions"}} in volumes
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


@pytest.mark.parametrize("store", [None, {"sqlite": {}}, {"sqlite": {"claimName": "c"}}])
def test_sqlite_with_several_replicas_is_refused_saying_why(store: dict[str, Any] | None) -> None:
    spec = agent(replicas=2, **({"store": store} if store is not None else {}))
    reason = store_refusal(spec, effective_store(spec, SETTINGS, agent="cart"))
    assert reason is not None
    assert reason.startswith("spec.replicas: 2 replicas cannot share an SQLite store")
    assert "spec.store.postgres" in reason


def test_a_dsn_from_a_secret_never_enters_the_deployment() -> None:
    spec = agent(
        replicas=3,
        store={
            "postgres": {"dsnSecretRef": {"name": "pg", "key": "uri"}, "sslMode": "verify-full"}
        },
    )
    assert store_refusal(spec, effective_store(spec, SETTINGS, agent="cart")) is None
    env = env_of(spec)
    assert env["ANKKA_STORE"] == {"secretKeyRef": {"name": "pg", "key": "uri"}}
    assert env["PGSSLMODE"] == "verify-full"
    assert env["PGOPTIONS"] == "-c search_path=ankka_shop_cart"
    assert "postgresql" not in str(
        pod_of(spec)["spec"]["template"]["spec"]["containers"][0]["args"]
    )


def test_the_parts_of_a_secret_become_libpqs_variables() -> None:
    spec = agent(
        replicas=2,
        store={
            "postgres": {
                "secretName": "pg-app",
                "keys": {"database": "db"},
                "schema": "carts",
            }
        },
    )
    env = env_of(spec)
    assert env["ANKKA_STORE"] == "postgresql://"
    assert env["PGHOST"] == {"secretKeyRef": {"name": "pg-app", "key": "host"}}
    assert env["PGPORT"] == {"secretKeyRef": {"name": "pg-app", "key": "port", "optional": True}}
    assert env["PGDATABASE"] == {"secretKeyRef": {"name": "pg-app", "key": "db"}}
    assert env["PGUSER"] == {"secretKeyRef": {"name": "pg-app", "key": "user"}}
    assert env["PGPASSWORD"] == {"secretKeyRef": {"name": "pg-app", "key": "password"}}
    assert env["PGOPTIONS"] == "-c search_path=carts"
    assert "PGSSLMODE" not in env


def test_the_charts_shared_postgres_is_every_agents_default_in_a_copied_secret() -> None:
    spec = agent(replicas=2)
    store = effective_store(spec, SHARED, agent="cart")
    assert store_refusal(spec, store) is None
    env = env_of(spec, SHARED)
    assert env["PGHOST"] == {"secretKeyRef": {"name": "cart-store", "key": "host"}}
    assert env["PGSSLMODE"] == "require"
    copy = copied_secret({"data": {"host": "cGc="}}, namespace="shop", agent="cart", uid="u1")
    assert copy["metadata"]["name"] == "cart-store" and copy["metadata"]["namespace"] == "shop"
    assert copy["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert copy["data"] == {"host": "cGc="}
    # An Agent's own store wins over the chart's.
    own = agent(store={"sqlite": {}})
    assert effective_store(own, SHARED, agent="cart").postgres is None


def test_a_shared_dsn_key_renders_the_dsn_from_the_copy() -> None:
    settings = Settings(
        namespace="platform", default_store_secret="pg", default_store_dsn_key="uri"
    )
    assert env_of(agent(), settings)["ANKKA_STORE"] == {
        "secretKeyRef": {"name": "cart-store", "key": "uri"}
    }


def test_each_agent_has_a_schema_of_its_own_within_postgres_limits() -> None:
    assert agent_schema("shop", "cart") == "ankka_shop_cart"
    assert agent_schema("team-b", "my.agent") == "ankka_team_b_my_agent"
    long = agent_schema("n" * 63, "a" * 63)
    assert len(long) == 63 and long != agent_schema("n" * 63, "a" * 62 + "b")


@pytest.mark.parametrize(
    "store",
    [
        {"sqlite": {}, "postgres": {"secretName": "x"}},
        {"postgres": {}},
        {"postgres": {"secretName": "x", "dsnSecretRef": {"name": "y", "key": "k"}}},
        {"postgres": {"secretName": "x", "schema": "Bad-Schema"}},
        {"postgres": {"secretName": "x", "sslMode": "sometimes"}},
    ],
)
def test_a_store_that_names_no_one_thing_is_refused(store: dict[str, Any]) -> None:
    # The CRD's CEL rules say the same to the API server (tests/cluster/test_stores.py).
    with pytest.raises(ValidationError):
        agent(store=store)
