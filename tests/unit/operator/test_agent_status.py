"""An Agent's status, decided by a pure function of what the reconcile found: staged
conditions (Rendered, ModelsServed, Available, Ready) and ready/desired replicas from the
Deployment it owns."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from ankka.operator.agent_status import Issued, availability, failed_status, rendered_status

T0 = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=5)
NOT_AFTER = "2026-01-02T12:00:00Z"
ISSUED = Issued(NOT_AFTER, "2026-01-02T04:00:00Z", "0123456789abcdef")


def deployment(
    *,
    replicas: int = 2,
    available: int = 0,
    updated: int | None = None,
    generation: int = 4,
    observed: int | None = 4,
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "availableReplicas": available,
        "updatedReplicas": available if updated is None else updated,
        "conditions": conditions or [],
    }
    if observed is not None:
        status["observedGeneration"] = observed
    return {
        "metadata": {"name": "cart", "generation": generation},
        "spec": {"replicas": replicas},
        "status": status,
    }


def conditions_of(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def states(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {k: (c["status"], c["reason"]) for k, c in conditions_of(status).items()}


def held(previous: dict[str, Any] | None, *, now: dt.datetime) -> dict[str, Any]:
    return rendered_status(
        previous,
        awaited=["qwen", "small"],
        replicas=2,
        deployment=deployment(replicas=0),
        certificate=ISSUED,
        generation=3,
        now=now,
    )


def released(
    previous: dict[str, Any] | None, *, now: dt.datetime, pods: dict[str, Any] | None = None
) -> dict[str, Any]:
    return rendered_status(
        previous,
        awaited=[],
        replicas=2,
        deployment=pods,
        certificate=ISSUED,
        generation=3,
        now=now,
    )


def test_an_agent_awaiting_models_is_held_naming_them_with_none_of_its_replicas() -> None:
    status = held(None, now=T0)
    assert status["phase"] == "Held"
    assert status["awaitingModels"] == ["qwen", "small"]
    assert status["certificateNotAfter"] == NOT_AFTER
    assert status["observedGeneration"] == 3
    assert (status["readyReplicas"], status["desiredReplicas"], status["replicasReady"]) == (
        0,
        2,
        "0/2",
    )
    assert states(status) == {
        "Rendered": ("True", "Applied"),
        "ModelsServed": ("False", "Awaiting"),
        "Available": ("False", "Held"),
        "Ready": ("False", "Awaiting"),
    }
    assert "qwen, small" in conditions_of(status)["Ready"]["message"]


def test_a_released_agent_is_progressing_until_its_deployment_has_the_replicas() -> None:
    status = released(held(None, now=T0), now=T1, pods=deployment(available=1))
    assert status["phase"] == "Progressing"
    assert status["replicasReady"] == "1/2"
    assert states(status)["ModelsServed"] == ("True", "AllServed")
    assert states(status)["Available"] == ("False", "Progressing")
    ready = conditions_of(status)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "Progressing")
    assert ready["message"] == "1 of 2 replica(s) available"


def test_an_agent_is_ready_only_when_every_desired_replica_is_available() -> None:
    status = released(None, now=T1, pods=deployment(available=2))
    assert status["phase"] == "Ready"
    assert status["replicasReady"] == "2/2"
    assert states(status)["Available"] == ("True", "MinimumReplicasAvailable")
    ready = conditions_of(status)["Ready"]
    assert (ready["status"], ready["reason"]) == ("True", "Available")
    assert ready["lastTransitionTime"] == "2026-01-01T12:05:00Z"


@pytest.mark.parametrize(
    ("pods", "reason"),
    [
        (None, "Progressing"),  # not watched yet
        (deployment(available=2, observed=3), "Progressing"),  # its change not seen yet
        (deployment(available=2, observed=None), "Progressing"),
        (deployment(replicas=0, available=0), "Progressing"),  # the release not applied yet
        (deployment(available=2, updated=1), "Progressing"),  # old pods still serve
    ],
)
def test_a_deployment_not_yet_rolled_out_is_not_available(
    pods: dict[str, Any] | None, reason: str
) -> None:
    verdict = availability(pods, desired=2, held=False)
    assert (verdict.available, verdict.reason) == (False, reason)


def test_the_deployments_own_failure_is_the_reason_and_its_words_the_message() -> None:
    refused = {
        "type": "ReplicaFailure",
        "status": "True",
        "reason": "FailedCreate",
        "message": 'pods "cart-1" is forbidden: violates PodSecurity "restricted:latest"',
    }
    verdict = availability(deployment(conditions=[refused]), desired=2, held=False)
    assert (verdict.available, verdict.reason) == (False, "ReplicaFailure")
    assert verdict.message.startswith("0 of 2 replica(s) available: pods")
    late = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
    assert availability(deployment(conditions=[late]), desired=2, held=False).reason == (
        "ProgressDeadlineExceeded"
    )


def test_an_agent_asking_for_no_replicas_is_ready_with_none() -> None:
    verdict = availability(deployment(replicas=0), desired=0, held=False)
    assert (verdict.available, verdict.reason, verdict.ready) == (True, "ScaledToZero", 0)


def test_a_condition_that_did_not_change_keeps_its_transition_time() -> None:
    status = held(held(None, now=T0), now=T1)
    c = conditions_of(status)
    assert c["ModelsServed"]["lastTransitionTime"] == "2026-01-01T12:00:00Z"
    assert c["Ready"]["lastTransitionTime"] == "2026-01-01T12:00:00Z"


def test_an_invalid_agent_fails_saying_why_and_keeps_its_models_condition() -> None:
    before = released(None, now=T0, pods=deployment(available=2))
    status = failed_status(
        before,
        reason="spec.models[0].address: remove the address",
        desired=2,
        generation=4,
        now=T1,
    )
    assert status["phase"] == "Failed"
    assert status["observedGeneration"] == 4
    assert status["replicasReady"] == "0/2"
    assert "awaitingModels" not in status  # a merge patch leaves what was written before
    assert states(status) == {
        "Rendered": ("False", "InvalidSpec"),
        "ModelsServed": ("True", "AllServed"),
        "Available": ("False", "NotRendered"),
        "Ready": ("False", "InvalidSpec"),
    }
    assert conditions_of(status)["Ready"]["message"] == "spec.models[0].address: remove the address"


def test_the_status_carries_no_private_keys() -> None:
    failed = failed_status(None, reason="x", desired=1, generation=1, now=T0)
    for status in (held(None, now=T0), failed):
        assert set(status) <= {
            "phase",
            "conditions",
            "observedGeneration",
            "awaitingModels",
            "certificateNotAfter",
            "certificateRenewAt",
            "certificateProfile",
            "readyReplicas",
            "desiredReplicas",
            "replicasReady",
        }
