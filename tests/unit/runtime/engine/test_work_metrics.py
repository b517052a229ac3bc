"""The runtime's metrics of tasks, approvals, delegations and GenAI calls, read from its
registry as Prometheus text after real work on SQLite with the scripted provider: counted once
each, labelled by agent, tool and fixed words only."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from ankka.runtime.drivers.tasks.host import TaskHost
from ankka.runtime.engine.work_metrics import WorkMetrics
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.tasks import TaskState
from tests.unit.runtime.conftest import MakeHost, finished, put
from tests.unit.runtime.drivers.tasks.test_iteration import GOOD, LOOKUP, agent_service, complete
from tests.unit.runtime.drivers.test_approvals import Make, make, refund_call, service, suspend

__all__ = ["make"]  # the approvals' fixture, used here


def _text(host: TaskHost) -> str:
    return host.bench.context.metrics.render().decode()


async def test_a_tasks_start_iterations_and_end_are_counted_once(make_host: MakeHost) -> None:
    usage = {"input_tokens": 30, "output_tokens": 4}
    provider = ScriptedProvider([{**LOOKUP, "usage": usage}, complete(GOOD)], name="default")
    host = await make_host(agent_service(), provider)
    await put(host, "t1")
    assert (await finished(host, "t1")).state == TaskState.COMPLETED
    text = _text(host)
    assert 'ankka_tasks_started_total{agent="researcher"} 1.0' in text
    assert 'ankka_tasks_ended_total{agent="researcher",state="completed"} 1.0' in text
    assert 'ankka_task_iterations_total{agent="researcher",outcome="completed"} 2.0' in text
    assert "ankka_task_ends_total{" not in text
    # The GenAI client metrics, beside ankka's own names: one call's 30 input tokens.
    labels = 'gen_ai_operation_name="chat",gen_ai_provider_name="ankka.scripted"'
    assert f'gen_ai_client_token_usage_bucket{{{labels},gen_ai_request_model="scripted",' in text
    assert (
        f'gen_ai_client_token_usage_sum{{{labels},gen_ai_request_model="scripted",'
        'gen_ai_token_type="input"} 30.0'
    ) in text
    assert (
        f'gen_ai_client_operation_duration_seconds_count{{error_type="",{labels},'
        'gen_ai_request_model="scripted"} 2.0'
    ) in text


async def test_a_spent_budget_is_counted_as_its_cause(make_host: MakeHost) -> None:
    provider = ScriptedProvider([LOOKUP, LOOKUP], name="default")
    host = await make_host(agent_service(budget=2), provider)
    await put(host, "t1")
    assert (await finished(host, "t1")).state == TaskState.FAILED
    text = _text(host)
    assert 'ankka_tasks_ended_total{agent="researcher",state="failed"} 1.0' in text
    assert 'ankka_task_ends_total{agent="researcher",cause="budget_exhausted"} 1.0' in text


async def test_approvals_requested_decided_and_the_wait_are_counted(make: Make) -> None:
    script: list[dict[str, Any] | str] = [{"tool_calls": [refund_call("A1", 250)]}, "Done."]
    runtime, _ = await make(service(), script)
    (request,) = await suspend(runtime)
    await runtime.approvals._count_pending()
    text = runtime.metrics.render().decode()
    assert 'ankka_approvals_requested_total{agent="refunds",tool="refund"} 1.0' in text
    assert "ankka_approvals_pending 1.0" in text
    runtime.context.clock.advance(30)  # type: ignore[attr-defined]
    await runtime.approvals.decide(request.id, "refused", request.digest, decided_by="ann")
    await runtime.approvals._count_pending()
    text = runtime.metrics.render().decode()
    assert (
        'ankka_approvals_decided_total{agent="refunds",decision="refused",tool="refund"} 1.0'
    ) in text
    assert 'ankka_approval_decision_seconds_sum{agent="refunds",decision="refused"} 30.0' in text
    assert "ankka_approvals_pending 0.0" in text


def test_only_published_task_events_are_counted() -> None:
    metrics = WorkMetrics(CollectorRegistry())
    metrics.heard("task_assigned", "a", {})
    metrics.heard("iteration_failed", "a", {"error": "x"})
    metrics.heard("task_cancelled", "a", {"reason": "free text never a label"})
    assert metrics.iterations.labels("a", "failed")._value.get() == 1
    assert metrics.tasks_ended.labels("a", "cancelled")._value.get() == 1
    assert metrics.tasks_started.labels("a")._value.get() == 0
