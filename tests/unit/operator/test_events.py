"""Which transitions become Events, and the Event a transition becomes."""

from __future__ import annotations

import datetime as dt

from ankka.operator.events import (
    Happening,
    agent_happening,
    event,
    model_happening,
    task_handed,
    task_happening,
)

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def test_an_agent_event_is_posted_on_a_phase_change_only() -> None:
    assert agent_happening("Held", "Held", "x") is None
    assert agent_happening("Ready", "Ready", "x") is None
    assert agent_happening(None, "Held", "m") == Happening("Normal", "Held", "m")
    assert agent_happening("Held", "Progressing", "m") == Happening("Normal", "Released", "m")
    assert agent_happening(None, "Progressing", "m") == Happening("Normal", "Rendered", "m")
    assert agent_happening("Progressing", "Ready", "m") == Happening("Normal", "Available", "m")
    assert agent_happening("Ready", "Progressing", "1 of 2") == Happening(
        "Warning", "Unavailable", "1 of 2"
    )
    assert agent_happening("Ready", "Failed", "bad") == Happening("Warning", "InvalidSpec", "bad")


def test_a_model_event_is_posted_when_served_changes() -> None:
    assert model_happening(True, True, "x") is None
    assert model_happening(False, False, "x") is None
    assert model_happening(None, False, "503") == Happening("Warning", "ProbeFailed", "503")
    assert model_happening(False, True, "ok") == Happening("Normal", "Served", "ok")
    assert model_happening(True, False, "gone") == Happening("Warning", "ProbeFailed", "gone")


def test_the_event_names_its_object_and_is_bounded() -> None:
    about = {"apiVersion": "ankka.dev/v1alpha1", "kind": "Agent", "name": "cart"}
    body = event(
        {**about, "namespace": "shop", "uid": "u1"},
        Happening("Warning", "InvalidSpec", "x" * 5000),
        now=NOW,
    )
    assert body["metadata"] == {"generateName": "cart.", "namespace": "shop"}
    assert body["involvedObject"] == {**about, "namespace": "shop", "uid": "u1"}
    assert (body["type"], body["reason"], body["count"]) == ("Warning", "InvalidSpec", 1)
    assert len(body["message"]) == 1024
    assert body["firstTimestamp"] == body["lastTimestamp"] == "2026-01-01T12:00:00Z"
    assert body["source"] == {"component": "ankka-operator"}


def test_a_task_event_is_posted_on_a_phase_change_only() -> None:
    assert task_happening("Running", "Running", "still working") is None
    assert task_happening("Running", None, "no phase yet") is None
    assert task_happening(None, "Running", "handed to the runtime") is None
    assert task_handed(False, True, "accepted") == Happening("Normal", "Handed", "accepted")
    assert task_handed(True, True, "accepted") is None
    failed = task_happening("Running", "Failed", "the budget of 5 iterations ran out")
    assert failed is not None and (failed.type, failed.reason) == ("Warning", "Failed")
    done = task_happening("Running", "Completed", "done")
    assert done is not None and done.reason == "Completed"
