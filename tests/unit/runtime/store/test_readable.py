"""The store's read condition says what the session policy says: for every caller, creator and
agent, a row passes :func:`clause` exactly when :meth:`SessionPolicy.allows` lets the caller
read it; and a cursor the runtime did not give is refused."""

from __future__ import annotations

import sqlite3
from itertools import product

import pytest

from ankka.runtime.declare.policy import Access, SessionPolicy
from ankka.runtime.store.readable import (
    BadCursor,
    clause,
    decode_cursor,
    encode_cursor,
    readers,
)

CALLERS = ("alice", "bob", "ankka://service/audit/reader", "ankka://platform/op", "local")
CREATORS = (None, "alice", "bob", "local")
AGENTS = (None, "refunds", "weather", "other")
POLICIES = (
    SessionPolicy(),
    SessionPolicy(Access(read=("bob",))),
    SessionPolicy(agents={"refunds": Access(read=("audit/*",))}),
    SessionPolicy(Access(write=("alice",)), {"weather": Access(decide=("bob",))}),
    SessionPolicy(Access(read=("audit/*",)), {"refunds": Access()}),
)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_row_passes_the_query_exactly_when_the_policy_lets_the_caller_read_it(
    policy: SessionPolicy,
) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE r (creator TEXT, agent TEXT)")
    rows = list(product(CREATORS, AGENTS))
    db.executemany("INSERT INTO r VALUES (?, ?)", rows)
    for caller in CALLERS:
        condition, params = clause(readers(policy, caller), "creator", "agent")
        passed = set(db.execute(f"SELECT creator, agent FROM r WHERE {condition}", params))
        allowed = {(c, a) for c, a in rows if policy.allows(caller, "read", creator=c, agent=a)}
        assert passed == allowed, caller


def test_a_cursor_round_trips_and_any_other_text_is_refused_naming_the_parameter() -> None:
    key = ("2026-12-02T06:00:00.000001+00:00", "apr_é1")
    assert decode_cursor(encode_cursor(key)) == key
    for bad in ("", "not-a-cursor", "W10", encode_cursor(("a", "b")) + "x" * 3000, "e30"):
        with pytest.raises(BadCursor, match=r"\?after= is not a cursor"):
            decode_cursor(bad, name="after")
