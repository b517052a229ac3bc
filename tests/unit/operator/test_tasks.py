"""The operator's pure Task builders: where the runtime is, what it is sent, what status shows."""

from __future__ import annotations

from ankka.api.resources import AgentSpec, TaskSpec
from ankka.operator import tasks


def test_a_runtime_outside_the_cluster_is_reached_at_its_address() -> None:
    inside = AgentSpec.model_validate({"image": "i", "module": "m"})
    outside = AgentSpec.model_validate(
        {"image": "i", "module": "m", "runtime": {"address": "http://127.0.0.1:8000/"}}
    )
    assert tasks.runtime_address("shop", "cart", inside) == "https://cart.shop.svc:443"
    assert tasks.runtime_address("shop", "cart", outside) == "http://127.0.0.1:8000"


def test_the_runtime_is_sent_what_the_task_says_with_dependencies_by_uid() -> None:
    spec = TaskSpec.model_validate(
        {
            "agent": "research",
            "autonomousAgent": "researcher",
            "type": "summary",
            "instructions": "Summarise ankka.",
            "attachments": [{"name": "notes", "text": "..."}, {"ref": "s3://b/k"}],
            "dependsOn": ["first"],
        }
    )
    assert tasks.autonomous_agent(spec) == "researcher"
    assert tasks.runtime_body(spec, ["uid-1"]) == {
        "type": "summary",
        "instructions": "Summarise ankka.",
        "attachments": [{"name": "notes", "text": "..."}, {"ref": "s3://b/k"}],
        "depends_on": ["uid-1"],
    }
    assert tasks.runtime_body(spec, [], name="lab/summary-1")["name"] == "lab/summary-1"


def test_the_status_is_a_bounded_summary_of_the_record() -> None:
    record = {
        "id": "uid-1",
        "state": "result-rejected",
        "iterations": {"used": 2, "budget": 5},
        "usage": {"input_tokens": 10, "output_tokens": 3, "cache_read_tokens": 4},
        "result": None,
        "reason": "x" * 5000,
        "version": 9,
    }
    status = tasks.status_from_record(record)
    assert status["phase"] == "Running" and status["state"] == "result-rejected"
    assert status["iterationsUsed"] == 2 and status["iterationBudget"] == 5
    assert status["tokens"] == {"input": 10, "output": 3, "cacheRead": 4, "cacheWrite": 0}
    assert len(status["reason"]) == tasks.MAX_REASON and status["lastEvent"] == 9


def test_a_result_too_large_for_etcd_stays_at_the_runtime() -> None:
    record = {"id": "u", "state": "completed", "result": {"text": "y" * 20_000}}
    status = tasks.status_from_record(record)
    assert status["phase"] == "Completed" and status["result"] is None
    assert "GET /v1/tasks/u" in status["reason"]
    assert tasks.is_final(status)
