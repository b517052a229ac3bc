"""Tasks carry ankka's own finalizer (``ankka.dev/task-cancellation``), not kopf's default, and
a Task an older operator marked with kopf's is freed of it, so deleting it never hangs."""

from __future__ import annotations

import json
from typing import Any

from tests.cluster.conftest import Kubectl, Operator
from tests.support.eventually import eventually

NS = "finalizer-lab"
OURS = "ankka.dev/task-cancellation"
KOPFS = "kopf.zalando.org/KopfFinalizerMarker"


def task(name: str, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ankka.dev/v1alpha1",
        "kind": "Task",
        "metadata": {"name": name, "namespace": NS, **meta},
        "spec": {"agent": "nobody", "type": "summary", "instructions": "Summarise."},
    }


def finalizers(kubectl: Kubectl, name: str) -> list[str]:
    body = kubectl.get("task", name, NS)
    assert body is not None, f"no Task {name}"
    found: list[str] = body["metadata"].get("finalizers") or []
    return found


def test_a_task_carries_ankkas_finalizer_and_deletes(kubectl: Kubectl, operator: Operator) -> None:
    kubectl.run("create", "namespace", NS)
    kubectl.run("apply", "-f", "-", stdin=json.dumps(task("plain")))
    assert eventually(lambda: finalizers(kubectl, "plain") == [OURS], what="ankka's finalizer")
    kubectl.run("delete", "task", "plain", "-n", NS, "--timeout=60s")
    assert kubectl.get("task", "plain", NS) is None


def test_kopfs_default_finalizer_left_by_an_older_operator_is_taken_off(
    kubectl: Kubectl, operator: Operator
) -> None:
    kubectl.run("apply", "-f", "-", stdin=json.dumps(task("legacy", finalizers=[KOPFS])))
    eventually(lambda: finalizers(kubectl, "legacy") == [OURS], what="kopf's marker replaced")
    kubectl.run("delete", "task", "legacy", "-n", NS, "--timeout=60s")
    assert kubectl.get("task", "legacy", NS) is None
