"""An Agent's status, decided by a pure function of what the reconcile found."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ankka.operator.agents import failed_status, rendered_status

T0 = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=5)
NOT_AFTER = "2026-01-02T12:00:00Z"


def conditions_of(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def held(previous: dict[str, Any] | None, *, now: dt.datetime) -> dict[str, Any]:
    return rendered_status(
        previous,
        awaited=["qwen", "small"],
        replicas=2,
        certificate_not_after=NOT_AFTER,
        generation=3,
        now=now,
    )


def released(previous: dict[str, Any] | None, *, now: dt.datetime) -> dict[str, Any]:
    return rendered_status(
        previous,
        awaited=[],
        replicas=2,
        certificate_not_after=NOT_AFTER,
        generation=3,
        now=now,
    )


def test_an_agent_awaiting_models_is_held_naming_them() -> None:
    status = held(None, now=T0)
    assert status["phase"] == "Held"
    assert status["awaitingModels"] == ["qwen", "small"]
    assert status["certificateNotAfter"] == NOT_AFTER
    assert status["observedGeneration"] == 3
    c = conditions_of(status)
    assert (c["ModelsServed"]["status"], c["ModelsServed"]["reason"]) == ("False", "Awaiting")
    assert "qwen, small" in c["ModelsServed"]["message"]
    assert (c["Ready"]["status"], c["Ready"]["reason"]) == ("False", "Held")


def test_a_released_agent_is_ready_and_awaits_nothing() -> None:
    status = released(held(None, now=T0), now=T1)
    assert status["phase"] == "Ready"
    assert status["awaitingModels"] == []
    c = conditions_of(status)
    assert (c["ModelsServed"]["status"], c["Ready"]["status"]) == ("True", "True")
    assert c["Ready"]["message"] == "rendered with 2 replica(s)"
    assert c["Ready"]["lastTransitionTime"] == "2026-01-01T12:05:00Z"


def test_a_condition_that_did_not_change_keeps_its_transition_time() -> None:
    status = held(held(None, now=T0), now=T1)
    c = conditions_of(status)
    assert c["ModelsServed"]["lastTransitionTime"] == "2026-01-01T12:00:00Z"
    assert c["Ready"]["lastTransitionTime"] == "2026-01-01T12:00:00Z"


def test_an_invalid_agent_fails_saying_why_and_keeps_its_other_conditions() -> None:
    before = released(None, now=T0)
    status = failed_status(
        before, reason="spec.models[0].address: remove the address", generation=4, now=T1
    )
    assert status["phase"] == "Failed"
    assert status["observedGeneration"] == 4
    assert "awaitingModels" not in status  # a merge patch leaves what was written before
    c = conditions_of(status)
    assert (c["Ready"]["status"], c["Ready"]["reason"]) == ("False", "InvalidSpec")
    assert c["Ready"]["message"] == "spec.models[0].address: remove the address"
    assert c["ModelsServed"] == conditions_of(before)["ModelsServed"]


def test_the_status_carries_no_private_keys() -> None:
    for status in (held(None, now=T0), failed_status(None, reason="x", generation=1, now=T0)):
        assert not [k for k in status if k.startswith("_")]
        assert set(status) <= {
            "phase",
            "conditions",
            "observedGeneration",
            "awaitingModels",
            "certificateNotAfter",
        }
