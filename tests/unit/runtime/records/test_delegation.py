"""Delegation's pure decisions, as a specification: ids, refusals, grants and what goes back."""

from __future__ import annotations

import json
from typing import Any

from ankka.runtime.records.delegation import (
    Budget,
    ChildOutcome,
    Claims,
    End,
    Exhausted,
    Grant,
    child_id,
    exhausted,
    grant,
    outcome_of_end,
    refusal,
    settled,
)

LIMITS: dict[str, Any] = {"max_depth": 3, "max_children": 4}


def test_a_child_id_names_its_parent_and_the_call_that_made_it() -> None:
    assert child_id("report-1", 2, 0) == "report-1:2.0"
    assert child_id("report-1:2.0", 1, 3) == "report-1:2.0:1.3"


def test_a_child_id_too_long_for_an_id_becomes_a_digest_of_the_same_derivation() -> None:
    parent = "p" * 126
    made = child_id(parent, 7, 1)
    assert made.startswith("d-") and len(made) <= 128
    assert made == child_id(parent, 7, 1)
    assert made != child_id(parent, 7, 2)


def test_a_delegation_back_to_an_agent_in_the_chain_is_a_cycle_naming_the_chain() -> None:
    why = refusal(lineage=("lead", "researcher"), target="lead", depth=1, children=0, **LIMITS)
    assert why is not None and why.error == "delegation_cycle"
    assert why.chain == ("lead", "researcher", "lead")
    assert "lead → researcher → lead" in why.reason


def test_a_child_past_the_depth_limit_is_refused() -> None:
    why = refusal(lineage=("a", "b", "c", "d"), target="e", depth=3, children=0, **LIMITS)
    assert why is not None and why.error == "depth_exceeded"
    assert refusal(lineage=("a", "b", "c"), target="e", depth=2, children=0, **LIMITS) is None


def test_a_task_with_its_fill_of_children_makes_no_more() -> None:
    why = refusal(lineage=("a",), target="b", depth=0, children=4, **LIMITS)
    assert why is not None and why.error == "too_many_children"


def test_an_ending_task_makes_no_children() -> None:
    why = refusal(lineage=("a",), target="b", depth=0, children=0, ending=True, **LIMITS)
    assert why is not None and why.error == "parent_ending"


def test_a_child_is_given_at_most_what_its_parent_has_left() -> None:
    assert grant(Budget(8), Claims(1), iterations=5, tokens=None) == Grant(5)
    assert grant(Budget(8), Claims(6), iterations=5, tokens=None) == Grant(2)
    spent = grant(Budget(8), Claims(8), iterations=5, tokens=None)
    assert isinstance(spent, Exhausted) and spent.what == "iterations"


def test_tokens_come_from_the_parents_token_budget_when_it_has_one() -> None:
    assert grant(Budget(8, 1000), Claims(1, 300), iterations=5, tokens=None) == Grant(5, 700, True)
    assert grant(Budget(8, 1000), Claims(1, 300), iterations=5, tokens=200) == Grant(5, 200, True)
    assert grant(Budget(8), Claims(1, 300), iterations=5, tokens=200) == Grant(5, 200, False)
    out = grant(Budget(8, 1000), Claims(1, 1000), iterations=5, tokens=None)
    assert isinstance(out, Exhausted) and out.what == "tokens"


def test_what_a_child_did_not_spend_goes_back_to_its_parent() -> None:
    given = Grant(5, 700, True)
    assert settled(given, 2, 250) == Claims(-3, -450)
    assert settled(Grant(5, 200, False), 2, 250) == Claims(-3, 0)  # the type's own tokens


def test_a_task_at_its_budget_makes_no_model_call() -> None:
    assert exhausted(Budget(5), Claims(4)) is None
    assert exhausted(Budget(5), Claims(5)) is not None
    assert exhausted(Budget(5, 100), Claims(1, 100)) is not None
    assert exhausted(Budget(5, 100), Claims(1, 99)) is None


def test_an_outcome_is_the_text_the_model_reads_and_an_error_unless_completed() -> None:
    done = outcome_of_end(End.COMPLETED, task="r:1.0", agent="researcher", result={"t": 1})
    assert not done.is_error
    assert json.loads(done.content()) == {
        "status": "completed",
        "task": "r:1.0",
        "agent": "researcher",
        "result": {"t": 1},
    }
    late = outcome_of_end(End.DEADLINE_EXCEEDED, task="r:1.1", agent="r", reason="no end")
    assert late.is_error and json.loads(late.content())["status"] == "deadline_exceeded"
    assert ChildOutcome.from_dict(late.as_dict()) == late
