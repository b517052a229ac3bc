"""A Team's status from what its runtime answered: the counts, the phase and its reason."""

from __future__ import annotations

from typing import Any

import pytest

from ankka.api.crdgen import crd
from ankka.api.resources import Team, TeamPhase, TeamSpec
from ankka.operator import teams

ADDRESS = "https://research.lab.svc:8443"
LISTING = {
    "team": "newsroom",
    "items": [],  # the counts are read, never the items
    "counts": {"ready": 2, "claimed": 1, "completed": 4, "failed": 1},
}


SUMMARY = {
    "team": "newsroom",
    "items": 8,
    "counts": {"ready": 2, "claimed": 1, "completed": 4, "failed": 1},
    "budget": {
        "iterations": {"limit": 40, "used": 11, "reserved": 3},
        "tokens": {"limit": None, "used": 772, "reserved": 0},
    },
}


def read(status_code: int, body: object, *, summary: bool = False) -> teams.Reading:
    return teams.reading_of(
        status_code, body, team="newsroom", agent="research", address=ADDRESS, summary=summary
    )


def test_the_team_is_spec_team_else_the_resource_s_name() -> None:
    assert teams.team_name("desk", TeamSpec(agent="research")) == "desk"
    assert teams.team_name("desk", TeamSpec(agent="research", team="newsroom")) == "newsroom"


def test_a_listing_is_active_with_every_state_counted() -> None:
    reading = read(200, LISTING)
    assert reading.phase is TeamPhase.ACTIVE and reading.reason == "Listed"
    fields = teams.status_fields(reading, team="newsroom", old={})
    assert fields == {
        "phase": "Active",
        "team": "newsroom",
        "counts": {
            "waiting": 0,
            "ready": 2,
            "claimed": 1,
            "completed": 4,
            "failed": 1,
            "cancelled": 0,
        },
        "items": 8,
        "budget": None,  # a listing carries none
        "reason": None,  # written as null: a merge patch takes an old reason away
    }


def test_a_summary_is_active_with_its_counts_and_its_budget() -> None:
    reading = read(200, SUMMARY, summary=True)
    assert reading.phase is TeamPhase.ACTIVE and reading.reason == "Summarised"
    fields = teams.status_fields(reading, team="newsroom", old={})
    assert fields["counts"] == teams.status_fields(read(200, LISTING), team="x", old={})["counts"]
    assert fields["items"] == 8
    assert fields["budget"] == {
        "iterations": {"limit": 40, "used": 11, "reserved": 3},
        "tokens": {"used": 772, "reserved": 0},  # unlimited: no limit
    }
    # A wait keeps the budget last read, as it keeps the counts.
    waiting = teams.waiting("RuntimeUnreachable", "cannot reach the runtime")
    assert teams.status_fields(waiting, team="newsroom", old=fields)["budget"] == fields["budget"]


def _merged(old: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``patch`` applied to ``old`` as the API server applies a status's merge patch
    (RFC 7386): null removes a key, an object merges into the old one, a key left out stays."""
    out = dict(old)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def test_a_limit_the_team_no_longer_sets_leaves_the_status_and_the_next_round_writes_nothing() -> (
    None
):
    before = teams.status_fields(read(200, SUMMARY, summary=True), team="newsroom", old={})
    tokens = {"limit": None, "used": 772, "reserved": 0}
    unlimited = {**SUMMARY, "budget": {"iterations": {"used": 11}, "tokens": tokens}}
    reading = read(200, unlimited, summary=True)
    stored = _merged(before, teams.status_fields(reading, team="newsroom", old=before))
    assert stored["budget"]["iterations"] == {"used": 11, "reserved": 0}  # no stale limit
    again = teams.status_fields(reading, team="newsroom", old=stored)
    assert _merged(stored, again) == stored and again["budget"] == stored["budget"]


def test_a_budget_value_that_is_no_count_is_not_guessed_at() -> None:
    raw = {"budget": {"iterations": {"limit": "40", "used": -2, "reserved": True}}}
    assert teams.budget_of(raw) == {"iterations": {"limit": 0, "used": 0, "reserved": 0}}
    assert teams.budget_of({"counts": {}}) is None


def test_a_state_the_operator_does_not_know_or_a_bad_count_is_not_guessed_at() -> None:
    counts = teams.counts_of({"counts": {"ready": 3, "paused": 5, "failed": -1, "claimed": "x"}})
    assert counts == {
        "waiting": 0,
        "ready": 3,
        "claimed": 0,
        "completed": 0,
        "failed": 0,
        "cancelled": 0,
    }


def test_a_runtime_serving_no_such_team_fails_the_team_naming_what_it_serves() -> None:
    said = {"error": {"type": "not_found", "message": "there is no team 'x' (teams: newsroom)"}}
    reading = read(404, said)
    assert reading.phase is TeamPhase.FAILED and reading.reason == "TeamNotServed"
    assert "(teams: newsroom)" in reading.message and "spec.team" in reading.message
    old = {"counts": {"ready": 9}, "items": 9}
    fields = teams.status_fields(reading, team="newsroom", old=old)
    assert fields["items"] == 0 and set(fields["counts"].values()) == {0}  # nothing to count
    assert fields["reason"] == reading.message


@pytest.mark.parametrize(
    ("status_code", "phase", "reason"),
    [
        (503, TeamPhase.WAITING, "RuntimeUnavailable"),
        (500, TeamPhase.WAITING, "RuntimeUnavailable"),
        (403, TeamPhase.FAILED, "Refused"),
        (401, TeamPhase.FAILED, "Refused"),
    ],
)
def test_other_answers(status_code: int, phase: TeamPhase, reason: str) -> None:
    reading = read(status_code, {"error": {"type": "x", "message": "said so"}})
    assert (reading.phase, reading.reason) == (phase, reason)
    assert str(status_code) in reading.message and "said so" in reading.message


def test_a_200_that_is_no_listing_is_a_wait_not_an_empty_backlog() -> None:
    reading = read(200, ["not", "a", "listing"])
    assert reading.phase is TeamPhase.WAITING and reading.counts is None


def test_a_wait_keeps_the_counts_last_read_and_a_failed_agent_fails() -> None:
    old = teams.status_fields(read(200, LISTING), team="newsroom", old={})
    waiting = teams.waiting("RuntimeUnreachable", "cannot reach the runtime")
    assert waiting.phase is TeamPhase.WAITING
    fields = teams.status_fields(waiting, team="newsroom", old=old)
    assert fields["counts"] == old["counts"] and fields["items"] == 8
    assert fields["phase"] == "Waiting" and fields["reason"] == "cannot reach the runtime"
    for why in ("AgentNotFound", "AgentHeld", "AgentNotReady"):
        assert teams.waiting(why, "").phase is TeamPhase.WAITING
    assert teams.waiting("AgentFailed", "its Agent failed").phase is TeamPhase.FAILED


def test_a_long_reason_is_cut() -> None:
    reading = read(503, {"error": {"message": "x" * 5000}})
    fields = teams.status_fields(reading, team="newsroom", old={})
    assert len(fields["reason"]) == teams.MAX_REASON and fields["reason"].endswith("…")


def test_kubectl_get_teams_shows_the_agent_and_the_counts() -> None:
    version = crd(Team)["spec"]["versions"][0]
    shown = [
        (c["name"], c["jsonPath"])
        for c in version["additionalPrinterColumns"]
        if not c.get("priority")
    ]
    assert shown == [
        ("Agent", ".spec.agent"),
        ("Phase", ".status.phase"),
        ("Ready", ".status.counts.ready"),
        ("Claimed", ".status.counts.claimed"),
        ("Done", ".status.counts.completed"),
        ("Failed", ".status.counts.failed"),
        ("Iterations", ".status.budget.iterations.used"),
        ("Age", ".metadata.creationTimestamp"),
    ]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert set(status["counts"]["properties"]) == set(teams.STATES)
    assert version["subresources"] == {"status": {}}
