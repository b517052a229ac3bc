"""Who may reach an Agent's runtime: its NetworkPolicy from spec.callers, the callers' schema
rules, the TokenReview settings and the ClusterRoleBinding naming the Agents' accounts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from ankka.api.resources import AgentSpec, InstallationModelSpec
from ankka.operator.agents import RUNTIME_PORT, agent_children, invalid_reason, runtime_env
from ankka.operator.models import server_children
from ankka.operator.netpol import agent_network_policy, token_review_binding
from ankka.operator.settings import Settings

SETTINGS = Settings(namespace="platform")


def spec(callers: list[dict[str, Any]] | None = None) -> AgentSpec:
    return AgentSpec.model_validate(
        {"image": "shop:1", "module": "shop.agents", "callers": callers or []}
    )


def policy(s: AgentSpec, settings: Settings = SETTINGS) -> dict[str, Any]:
    return agent_network_policy(
        namespace="shop", name="cart", uid="u1", spec=s, settings=settings, port=RUNTIME_PORT
    )


def in_ns(ns: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
        "podSelector": {"matchLabels": labels},
    }


def test_without_callers_only_the_gateway_and_the_operator_reach_the_serving_port() -> None:
    p = policy(spec())
    assert p["spec"]["podSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "agent", "app.kubernetes.io/instance": "cart"}
    }
    assert p["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = p["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": RUNTIME_PORT}]
    assert rule["from"] == [
        in_ns("platform", {"app.kubernetes.io/name": "ankka-gateway"}),
        in_ns("platform", {"app.kubernetes.io/name": "ankka-operator"}),
    ]


def test_declared_callers_become_peers_in_their_namespace_or_the_agents() -> None:
    p = policy(
        spec(
            [
                {"agent": "checkout"},
                {"agent": "search", "namespace": "catalog"},
                {"namespace": "web", "podSelector": {"matchLabels": {"app": "storefront"}}},
                {"podSelector": {"matchLabels": {"role": "batch"}}},
                {"namespace": "ops"},
            ]
        )
    )
    peers = p["spec"]["ingress"][0]["from"][2:]
    agent = "app.kubernetes.io/name"
    assert peers == [
        in_ns("shop", {agent: "agent", "app.kubernetes.io/instance": "checkout"}),
        in_ns("catalog", {agent: "agent", "app.kubernetes.io/instance": "search"}),
        in_ns("web", {"app": "storefront"}),
        in_ns("shop", {"role": "batch"}),
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ops"}}},
    ]


def test_the_policy_is_owned_by_the_agent() -> None:
    (owner,) = policy(spec())["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Agent", "cart", "u1")


def test_switched_off_no_policy_is_rendered() -> None:
    off = Settings(namespace="platform", network_policies=False)
    children = agent_children(
        namespace="shop", name="cart", uid="u1", spec=spec(), settings=off, held=False
    )
    assert "NetworkPolicy" not in [c["kind"] for c in children]


@pytest.mark.parametrize(
    ("caller", "words"),
    [
        ({"agent": "a", "podSelector": {"matchLabels": {}}}, "not both"),
        ({}, "name an agent, a podSelector or a namespace"),
    ],
)
def test_a_caller_the_schema_refuses_is_refused_by_the_operator_too(
    caller: dict[str, Any], words: str
) -> None:
    reason = invalid_reason(spec([caller]))
    assert reason is not None and "spec.callers[0]" in reason and words in reason


def test_a_caller_names_a_dns_label() -> None:
    with pytest.raises(ValidationError):
        spec([{"agent": "Not_A_Label"}])


def test_the_runtime_is_told_where_to_review_tokens_for_its_own_audience() -> None:
    env = {
        e["name"]: e["value"] for e in runtime_env(spec(), SETTINGS, namespace="shop", name="cart")
    }
    assert env["ANKKA_TOKEN_REVIEW_URL"] == "https://kubernetes.default.svc"
    assert env["ANKKA_TOKEN_REVIEW_AUDIENCE"] == "ankka://service/shop/cart"
    off = Settings(namespace="platform", token_review_url="")
    names = {e["name"] for e in runtime_env(spec(), off, namespace="shop", name="cart")}
    assert not names & {"ANKKA_TOKEN_REVIEW_URL", "ANKKA_TOKEN_REVIEW_AUDIENCE"}


def test_a_users_env_cannot_redirect_token_review() -> None:
    s = AgentSpec.model_validate(
        {
            "image": "shop:1",
            "module": "m",
            "env": [{"name": "ANKKA_TOKEN_REVIEW_URL", "value": "https://evil.example"}],
        }
    )
    values = [
        e["value"]
        for e in runtime_env(s, SETTINGS, namespace="shop", name="cart")
        if e["name"] == "ANKKA_TOKEN_REVIEW_URL"
    ]
    assert values == ["https://kubernetes.default.svc"]


def test_the_binding_names_every_agents_account_once_sorted() -> None:
    b = token_review_binding([("shop", "cart"), ("a", "z"), ("shop", "cart")], SETTINGS)
    assert b["roleRef"]["name"] == "ankka-runtime-token-review"
    assert b["subjects"] == [
        {"kind": "ServiceAccount", "name": "z", "namespace": "a"},
        {"kind": "ServiceAccount", "name": "cart", "namespace": "shop"},
    ]
    assert token_review_binding([], SETTINGS)["subjects"] == []


def test_a_deployed_model_server_admits_only_the_gateway_and_the_operator() -> None:
    spec = InstallationModelSpec.model_validate(
        {"model": "qwen3:0.6b", "server": {"kind": "ollama", "image": "ollama/ollama:0.6"}}
    )
    children = server_children("models", "qwen", "u2", spec, SETTINGS)
    (p,) = [c for c in children if c["kind"] == "NetworkPolicy"]
    assert p["spec"]["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "model-server",
        "app.kubernetes.io/instance": "qwen",
    }
    (rule,) = p["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 11434}]
    assert rule["from"] == [
        in_ns("platform", {"app.kubernetes.io/name": "ankka-gateway"}),
        in_ns("platform", {"app.kubernetes.io/name": "ankka-operator"}),
    ]
    off = Settings(namespace="platform", network_policies=False)
    assert "NetworkPolicy" not in [c["kind"] for c in server_children("m", "q", "u", spec, off)]
