"""The session policy's pure rules: who holds read, write and decide, declared in Python or
given by an access file, and bad input refused naming its entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from ankka._kernel.errors import ConfigurationError
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.declare.policy import Access, SessionPolicy, load_policy
from ankka.runtime.tasks import Accepts, AutonomousAgent
from examples.tasks import summary


def _service() -> Service:
    service = Service("shop", access=Access(read=["ankka://service/audit/*"]))

    @service.agent("orders", access=Access(write=["system:serviceaccount:shop:*"]))
    def orders(request: TurnRequest) -> Turn:
        return Turn(message=request.message)

    @service.agent("faq")
    def faq(request: TurnRequest) -> Turn:
        return Turn(message=request.message)

    service.autonomous(
        AutonomousAgent(
            name="researcher",
            accepts=[Accepts(summary, budget=3)],
            access=Access(decide=["local"]),
        )
    )
    return service


def test_the_default_is_the_creator_and_the_platform() -> None:
    policy = SessionPolicy()
    for right in ("read", "write", "decide"):
        assert policy.allows("shop/a", right, creator="shop/a", agent="x")
        assert policy.allows("ankka://platform/operator", right, creator="shop/a", agent="x")
        assert not policy.allows("shop/b", right, creator="shop/a", agent="x")
    assert policy.allows("anyone", "write", creator=None, agent=None), "a new session"


def test_declared_access_grants_by_pattern_and_an_agents_replaces_the_services() -> None:
    policy = _service().policy()
    # The service's read, for the agent that declares none.
    assert policy.allows("audit/reader", "read", creator="shop/a", agent="faq")
    assert not policy.allows("audit/reader", "write", creator="shop/a", agent="faq")
    # A static token may name a service by its whole URI: the same caller.
    assert policy.allows("ankka://service/audit/x", "read", creator="shop/a", agent="faq")
    # The orders agent's own access replaces the service's: writing implies reading.
    assert not policy.allows("audit/reader", "read", creator="shop/a", agent="orders")
    sa = "system:serviceaccount:shop:web"
    assert policy.allows(sa, "write", creator="shop/a", agent="orders")
    assert policy.allows(sa, "read", creator="shop/a", agent="orders")
    assert not policy.allows(sa, "decide", creator="shop/a", agent="orders")
    assert not policy.allows("system:serviceaccount:other:web", "read", creator="x", agent="orders")
    # An autonomous agent's: deciding implies reading, and nothing more.
    assert policy.allows("local", "decide", creator="shop/a", agent="researcher")
    assert policy.allows("local", "read", creator="shop/a", agent="researcher")
    assert not policy.allows("local", "write", creator="shop/a", agent="researcher")


def test_an_access_file_overrides_entry_by_entry(tmp_path: Path) -> None:
    path = tmp_path / "access.yaml"
    path.write_text("agents:\n  faq:\n    read: [bob]\n")
    service = _service()
    policy = load_policy(path, service.policy(), [*service.agents, *service.autonomous_agents])
    assert policy.allows("bob", "read", creator="a", agent="faq")
    assert not policy.allows("audit/reader", "read", creator="a", agent="faq")
    assert policy.allows("audit/reader", "read", creator="a", agent="other"), "service kept"
    assert policy.access("orders").write == ("system:serviceaccount:shop:*",), "orders kept"
    path.write_text('{"service": {"decide": ["ankka://service/ops/*"]}}')  # JSON is YAML
    policy = load_policy(path, service.policy(), service.agents)
    assert policy.service.decide == ("ops/*",)


def test_the_files_approvers_decide_every_sessions_approvals_and_nothing_else(
    tmp_path: Path,
) -> None:
    path = tmp_path / "access.yaml"
    path.write_text("approvers: [system:serviceaccount:shop:cart-approver]\n")
    service = _service()
    policy = load_policy(path, service.policy(), service.agents)
    delegate = "system:serviceaccount:shop:cart-approver"
    for agent in ("orders", "faq", "researcher"):  # whatever the agent's own access says
        assert policy.allows(delegate, "decide", creator="shop/a", agent=agent)
    for agent in ("faq", "researcher"):  # (orders lets system:serviceaccount:shop:* write)
        assert not policy.allows(delegate, "read", creator="shop/a", agent=agent)
        assert not policy.allows(delegate, "write", creator="shop/a", agent=agent)
    assert not policy.allows("system:serviceaccount:shop:web", "decide", creator="x", agent="faq")
    path.write_text("approvers: cart-approver\n")
    with pytest.raises(ConfigurationError, match="approvers: give a list"):
        load_policy(path, service.policy(), service.agents)


@pytest.mark.parametrize(
    ("patterns", "named"),
    [
        (["shop/*/x"], "'*' before its end"),
        ([""], "not a caller pattern"),
        (["two words"], "no spaces"),
        ([42], "not a caller pattern"),
    ],
)
def test_a_bad_pattern_is_refused_naming_it(patterns: list[object], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named) as refused:
        Access(read=patterns)  # type: ignore[arg-type]
    assert "read[0]" in str(refused.value)


def test_a_string_for_a_list_and_a_wrong_access_type_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="give a list"):
        Access(read="local")
    with pytest.raises(ConfigurationError, match="access= takes an Access"):
        Service("x", access={"read": ["local"]}).policy()  # type: ignore[arg-type]


def test_an_unreadable_or_oversized_access_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read the access file"):
        load_policy(tmp_path / "missing.yaml", SessionPolicy(), [])
    big = tmp_path / "big.yaml"
    big.write_text("#" * (1 << 21))
    with pytest.raises(ConfigurationError, match="larger than"):
        load_policy(big, SessionPolicy(), [])
