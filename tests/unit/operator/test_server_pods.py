"""An InstallationModel whose server container keeps dying says how: ``ServerRunning``, from
the pods' container statuses as the kubelet writes them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from ankka.api.capabilities import ModelCapabilities
from ankka.api.resources import InstallationModelSpec
from ankka.operator.models import probe_target, served_status, server_children
from ankka.operator.server_pods import (
    Trouble,
    pod_selector,
    running_condition,
    server_trouble,
    termination_words,
)

NOW = dt.datetime(2026, 12, 1, 22, 0, tzinfo=dt.UTC)
LAST_WORDS = (
    "llama-server did not start in any of the 2 ways ankka tries:\n"
    "1. as built: it died of illegal instruction (SIGILL) before it was ready"
)


def pod(
    name: str = "smollm-6d5f-x2",
    *,
    restarts: int = 3,
    state: dict[str, Any] | None = None,
    last: dict[str, Any] | None = None,
    container: str = "server",
) -> dict[str, Any]:
    status = {
        "name": container,
        "ready": False,
        "restartCount": restarts,
        "state": state or {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": last or {},
    }
    return {"metadata": {"name": name}, "status": {"containerStatuses": [status]}}


def died(code: int, **more: Any) -> dict[str, Any]:
    return {"terminated": {"exitCode": code, "reason": "Error", **more}}


@pytest.mark.parametrize(
    ("terminated", "words"),
    [
        ({"exitCode": 132}, "died of illegal instruction (SIGILL) (exit code 132)"),
        ({"exitCode": 139, "signal": 11}, "died of segmentation fault (SIGSEGV) (exit code 139)"),
        ({"exitCode": 0, "signal": 4}, "died of illegal instruction (SIGILL) (exit code 0)"),
        ({"exitCode": 135}, "died of bus error (SIGBUS) (exit code 135)"),
        (
            {"exitCode": 137, "reason": "OOMKilled"},
            "was killed for want of memory (OOMKilled, exit code 137)",
        ),
        ({"exitCode": 1, "reason": "Error"}, "exited with code 1"),
        (
            {"exitCode": 128, "reason": "ContainerCannotRun"},
            "exited with code 128, ContainerCannotRun",
        ),
    ],
)
def test_a_termination_is_named_by_its_signal(terminated: dict[str, Any], words: str) -> None:
    assert termination_words(terminated) == words


def test_a_crash_looping_server_names_the_signal_restarts_and_last_words() -> None:
    trouble = server_trouble([pod(last=died(132, message=LAST_WORDS))])
    assert trouble is not None
    assert trouble.reason == "CrashLoopBackOff"
    assert trouble.message.startswith(
        "pod smollm-6d5f-x2: the server container died of illegal instruction (SIGILL) "
        "(exit code 132), restarted 3 times, now CrashLoopBackOff; its last words: "
    )
    assert LAST_WORDS in trouble.message


def test_a_server_that_never_died_is_no_trouble() -> None:
    loading = pod(restarts=0, state={"running": {"startedAt": "2026-12-01T22:00:00Z"}})
    assert server_trouble([loading]) is None
    assert server_trouble([pod(container="sidecar", last=died(132))]) is None
    assert server_trouble([{"metadata": {"name": "p"}, "status": {}}]) is None  # not scheduled


def test_the_pod_that_died_most_is_reported() -> None:
    once = pod("a", restarts=1, last=died(1))
    often = pod("b", restarts=7, last=died(132))
    trouble = server_trouble([once, often])
    assert trouble is not None
    assert trouble.message.startswith("pod b: the server container died of illegal instruction")


def test_a_container_terminated_now_is_reported_from_its_state() -> None:
    trouble = server_trouble([pod(restarts=0, state=died(139, signal=11))])
    assert trouble == Trouble(
        "ContainerDied",
        "pod smollm-6d5f-x2: the server container died of segmentation fault (SIGSEGV) "
        "(exit code 139)",
    )


def test_long_last_words_are_cut_to_their_end() -> None:
    trouble = server_trouble([pod(last=died(132, message="x" * 5000 + "THE END"))])
    assert trouble is not None
    assert trouble.message.endswith("THE END")
    assert len(trouble.message) < 800


def test_the_selector_names_the_deployments_labels() -> None:
    assert pod_selector({"b": "2", "a": "1"}) == "a=1,b=2"


SPEC = InstallationModelSpec.model_validate(
    {"model": "smollm2", "server": {"kind": "llamacpp", "image": "llama-server:1"}}
)
TARGET = probe_target("shop", "smollm", SPEC)


def test_the_status_carries_server_running_false_while_it_dies_then_true_once_served() -> None:
    trouble = server_trouble([pod(last=died(132, message=LAST_WORDS))])
    dying = served_status(
        {}, spec=SPEC, target=TARGET, probed=None, error="refused", generation=1, now=NOW,
        trouble=trouble,
    )  # fmt: skip
    running = {c["type"]: c for c in dying["conditions"]}["ServerRunning"]
    assert (running["status"], running["reason"]) == ("False", "CrashLoopBackOff")
    assert "illegal instruction (SIGILL)" in running["message"]
    assert {c["type"]: c for c in dying["conditions"]}["Served"]["status"] == "False"
    served = served_status(
        dying, spec=SPEC, target=TARGET, probed=ModelCapabilities("smollm2", frozenset()),
        error=None, generation=1,
        now=NOW,
    )  # fmt: skip
    again = {c["type"]: c for c in served["conditions"]}["ServerRunning"]
    assert (again["status"], again["reason"]) == ("True", "Running")


def test_a_model_whose_server_never_died_gets_no_server_running_condition() -> None:
    status = served_status(
        {}, spec=SPEC, target=TARGET, probed=None, error="refused", generation=1, now=NOW
    )
    assert "ServerRunning" not in {c["type"] for c in status["conditions"]}
    assert running_condition([], None, served=True, now=NOW) is None


def test_the_server_container_leaves_its_log_s_end_as_its_last_words() -> None:
    deployment = server_children("shop", "smollm", "uid-1", SPEC)[0]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "server"  # the name server_pods reads the statuses of
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
