"""An Agent's ``spec.access`` rendered as the runtime's ``--access-file`` (read back by the
runtime's own parser), with ankka approve's delegate among the approvers, and the pods rolled
when it changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ankka.api.resources import AgentSpec
from ankka.operator.access import access_file
from ankka.operator.agents import agent_children
from ankka.operator.settings import Settings
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.declare.policy import load_policy

ACCESS = {
    "service": {"read": ["ankka://service/audit/*"]},
    "agents": {"orders": {"write": ["system:serviceaccount:shop:web"], "decide": ["ann"]}},
}


def agent(**extra: Any) -> AgentSpec:
    return AgentSpec.model_validate({"image": "i", "module": "shop.agents", **extra})


def by_kind(spec: AgentSpec) -> dict[str, dict[str, Any]]:
    children = agent_children(
        namespace="shop", name="cart", uid="u1", spec=spec, settings=Settings(), held=False
    )
    return {f"{c['kind']}/{c['metadata']['name']}": c for c in children}


def shop() -> Service:
    service = Service("shop")

    @service.agent("orders")
    def orders(request: TurnRequest) -> Turn:
        return Turn(message=request.message)

    @service.agent("faq")
    def faq(request: TurnRequest) -> Turn:
        return Turn(message=request.message)

    return service


def test_the_rendered_file_is_the_policy_the_runtime_reads(tmp_path: Path) -> None:
    path = tmp_path / "access.yaml"
    path.write_text(access_file(agent(access=ACCESS), namespace="shop", name="cart"))
    service = shop()
    policy = load_policy(path, service.policy(), service.agents)
    assert policy.allows("audit/x", "read", creator="shop/a", agent="faq")
    assert policy.allows("system:serviceaccount:shop:web", "write", creator="u", agent="orders")
    assert policy.allows("ann", "decide", creator="u", agent="orders")
    assert not policy.allows("ann", "decide", creator="u", agent="faq")
    # ankka approve's delegate decides for every agent, and reads nothing.
    delegate = "system:serviceaccount:shop:cart-approver"
    for name in ("orders", "faq"):
        assert policy.allows(delegate, "decide", creator="u", agent=name)
        assert not policy.allows(delegate, "read", creator="u", agent=name)


def test_without_access_the_file_names_only_the_delegate(tmp_path: Path) -> None:
    path = tmp_path / "access.yaml"
    path.write_text(access_file(agent(), namespace="shop", name="cart"))
    service = shop()
    policy = load_policy(path, service.policy(), service.agents)
    assert policy.service == service.policy().service  # what the code declares stays
    assert policy.approvers == ("system:serviceaccount:shop:cart-approver",)


def test_the_runtime_reads_the_file_and_a_change_rolls_its_pods() -> None:
    plain, strict = by_kind(agent()), by_kind(agent(access=ACCESS))
    deployment = strict["Deployment/cart"]
    (runtime,) = deployment["spec"]["template"]["spec"]["containers"]
    assert runtime["args"][-2:] == ["--access-file", "/etc/ankka/access/access.yaml"]
    assert {"name": "access", "mountPath": "/etc/ankka/access", "readOnly": True} in runtime[
        "volumeMounts"
    ]
    assert {"name": "ANKKA_APPROVER_HEADER", "value": "X-Ankka-Approver"} in runtime["env"]
    assert "service" in strict["ConfigMap/cart-access"]["data"]["access.yaml"]

    def digest(kinds: dict[str, dict[str, Any]]) -> str:
        annotations = kinds["Deployment/cart"]["spec"]["template"]["metadata"]["annotations"]
        return str(annotations["ankka.dev/access-digest"])

    assert digest(plain) != digest(strict)
    assert digest(strict) == digest(by_kind(agent(access=ACCESS)))
    approver = strict["ServiceAccount/cart-approver"]
    assert approver["automountServiceAccountToken"] is False
    assert approver["metadata"]["ownerReferences"][0]["uid"] == "u1"


@pytest.mark.parametrize("pattern", ["a*b", "two words", ""])
def test_a_pattern_the_runtime_would_refuse_is_refused_by_the_schema(pattern: str) -> None:
    with pytest.raises(ValidationError):
        agent(access={"service": {"read": [pattern]}})
