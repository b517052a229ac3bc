"""Judged guardrails on an autonomous agent: given the service's judgment providers by the one
function both loops run guardrails through; a refusal fails the task, a fault is a failed
iteration (never a refusal, never a pass)."""

from __future__ import annotations

from ankka.runtime.declare.judgments.guardrail import refuse_if_yes
from ankka.runtime.judgments import YesNo
from ankka.runtime.providers.scripted import ScriptedJudgmentProvider, ScriptedProvider
from ankka.runtime.records.judgments import JudgmentUsage
from ankka.runtime.records.messages import Usage
from ankka.runtime.records.session import SessionOpened
from ankka.runtime.records.tasks import TaskState
from tests.unit.runtime.conftest import MakeHost, finished, put
from tests.unit.runtime.drivers.tasks.test_iteration import GOOD, agent_service, complete

ABUSIVE = YesNo("abusive", "Are the instructions abusive?")
NO_ABUSE = refuse_if_yes(ABUSIVE, at_least=0.8, reason="the instructions read as abusive")


async def test_a_judged_input_guardrail_refuses_a_task_with_the_services_judge(
    make_host: MakeHost,
) -> None:
    judge = ScriptedJudgmentProvider({"abusive": {"yes": 0.9, "no": 0.1}})
    provider = ScriptedProvider([complete(GOOD)], name="default")
    host = await make_host(
        agent_service(input_guardrails=[NO_ABUSE]), provider, judges={"default": judge}
    )
    await put(host, "t1", "You useless machine, summarise ankka.")
    record = await finished(host, "t1")
    assert record.state == TaskState.FAILED
    assert record.reason is not None and "the instructions read as abusive" in record.reason
    assert [i.text for i in judge.inquiries] == ["You useless machine, summarise ankka."]
    assert provider.requests == []  # refused before any model call


async def test_a_judged_input_guardrail_that_passes_lets_the_task_run(
    make_host: MakeHost,
) -> None:
    judge = ScriptedJudgmentProvider({"abusive": {"yes": 0.1, "no": 0.9}})
    provider = ScriptedProvider([complete(GOOD)], name="default")
    host = await make_host(
        agent_service(input_guardrails=[NO_ABUSE]), provider, judges={"default": judge}
    )
    await put(host, "t1")
    record = await finished(host, "t1")
    assert record.state == TaskState.COMPLETED
    assert len(judge.inquiries) == 1


async def test_a_judged_guardrail_whose_judge_fails_is_a_failed_iteration_not_a_refusal(
    make_host: MakeHost,
) -> None:
    judge = ScriptedJudgmentProvider({"abusive": {"yes": 0.1, "no": 0.9}})
    judge.fail_next("the judge is down")
    provider = ScriptedProvider([complete(GOOD)], name="default")
    host = await make_host(
        agent_service(input_guardrails=[NO_ABUSE]), provider, judges={"default": judge}
    )
    await put(host, "t1")
    record = await finished(host, "t1")
    # One failed check (counted), then the judge answers and the task completes.
    assert record.state == TaskState.COMPLETED
    assert len(judge.inquiries) == 2


async def test_tokens_judged_guardrails_spend_are_the_tasks_judgment_usage_and_in_its_usage(
    make_host: MakeHost,
) -> None:
    spent = Usage(40, 2)
    judge = ScriptedJudgmentProvider({"abusive": {"yes": 0.1, "no": 0.9}}, usage=spent)
    provider = ScriptedProvider(
        [complete(GOOD, usage={"input_tokens": 5, "output_tokens": 1})], name="default"
    )
    service = agent_service(input_guardrails=[NO_ABUSE], output_guardrails=[NO_ABUSE])
    host = await make_host(service, provider, judges={"default": judge})
    await put(host, "t1")
    record = await finished(host, "t1")

    assert record.state == TaskState.COMPLETED
    assert len(judge.inquiries) == 2  # the instructions, then the result
    entries = await host.context.journal.read("task:t1")
    assert entries[0].record == SessionOpened("local", "researcher")  # opened before anything
    judged = [e.record for e in entries if isinstance(e.record, JudgmentUsage)]
    assert [(j.usage, j.turn) for j in judged] == [(spent, "t1#input"), (spent, "t1#1")]
    # Summed on the record beside the model call's tokens, once each.
    assert record.usage == Usage(5, 1) + spent + spent
