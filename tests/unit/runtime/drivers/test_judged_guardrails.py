"""Judged guardrails: a refusal is a rule's verdict, a provider's fault is never one.

Through the real host and loop on SQLite, with the scripted model and judgment providers at the
model boundary.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from ankka._kernel.errors import ModelTimeout, Refused
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.judgments import (
    GuardrailCheckFailed,
    Inquiry,
    JudgedGuardrail,
    JudgmentProvider,
    JudgmentScriptFailed,
    ProviderJudgment,
    ScriptedJudgmentProvider,
    YesNo,
    refuse_if_yes,
)
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.messages import Usage
from tests.support.runtimes import runtime_for
from tests.support.stores import journal_store

ABUSIVE = YesNo("abusive", "Is the message abusive?")
NO_ABUSE = refuse_if_yes(ABUSIVE, at_least=0.8, reason="the message reads as abusive")
SPENT = Usage(input_tokens=40, output_tokens=1)

Make = Callable[..., Awaitable[tuple[Runtime, ScriptedProvider]]]


def guarded(*rails: JudgedGuardrail, write_memory: bool = True) -> Service:
    service = Service("test")

    @service.agent("helper")
    def helper(request: TurnRequest) -> Turn:
        return Turn(message=request.message, input_guardrails=rails, write_memory=write_memory)

    return service


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Make]:
    made: list[Runtime] = []

    async def build(
        service: Service, judge: JudgmentProvider | None, script: list[Any] | None = None
    ) -> tuple[Runtime, ScriptedProvider]:
        store = await journal_store(tmp_path / "journal.sqlite3")
        model = ScriptedProvider(script or [], name="default")
        judges = {"default": judge} if judge is not None else {}
        runtime = runtime_for(service, store=store, providers={"default": model}, judges=judges)
        made.append(runtime)
        return runtime, model

    yield build
    for runtime in made:
        await runtime.aclose()


async def test_a_likely_yes_refuses_the_turn_before_the_model_is_called(make: Make) -> None:
    judge = ScriptedJudgmentProvider({"abusive": {"yes": 0.9, "no": 0.1}}, usage=SPENT)
    runtime, model = await make(guarded(NO_ABUSE), judge)

    with pytest.raises(Refused, match=r"reads as abusive.*0.90") as refused:
        await runtime.run(runtime.plan("helper", "s", "You are useless!"))

    assert refused.value.by == "input guardrail 'abusive'"
    assert model.requests == []
    assert judge.inquiries[0].text == "You are useless!"


async def test_an_unlikely_yes_passes_and_the_model_answers(make: Make) -> None:
    judge = ScriptedJudgmentProvider({"abusive": {"yes": 0.3, "no": 0.7}}, usage=SPENT)
    runtime, _ = await make(guarded(NO_ABUSE), judge, [{"text": "Happy to help."}])

    result = await runtime.run(runtime.plan("helper", "s", "Where is my parcel?"))

    assert result.reply == "Happy to help."


async def test_a_provider_fault_is_a_check_failure_never_a_refusal_or_a_pass(make: Make) -> None:
    judge = ScriptedJudgmentProvider({"abusive": "no"})
    judge.fail_next("the judgment model is down")
    runtime, model = await make(guarded(NO_ABUSE), judge, [{"text": "unused"}])

    with pytest.raises(GuardrailCheckFailed, match=r"'abusive' could not decide.*down") as failed:
        await runtime.run(runtime.plan("helper", "s", "Where is my parcel?"))

    assert not isinstance(failed.value, Refused)
    assert failed.value.status == 503
    assert model.requests == []  # not passed either: the model was never asked
    assert await runtime.messages("s") == []


async def test_a_timed_out_provider_is_answered_504(make: Make) -> None:
    class Slow:
        name = "slow"

        async def judge(self, inquiry: Inquiry) -> ProviderJudgment:
            raise ModelTimeout("slow", "no answer within the model timeout of 1s")

    runtime, _ = await make(guarded(NO_ABUSE), Slow())

    with pytest.raises(GuardrailCheckFailed) as failed:
        await runtime.run(runtime.plan("helper", "s", "Hi"))

    assert failed.value.status == 504


async def test_no_judgment_provider_at_all_is_an_internal_error(make: Make) -> None:
    runtime, _ = await make(guarded(NO_ABUSE), None)

    with pytest.raises(
        GuardrailCheckFailed, match=r"no judgment provider for model 'default'"
    ) as f:
        await runtime.run(runtime.plan("helper", "s", "Hi"))

    assert f.value.status == 500


async def test_an_unscripted_question_goes_through_unchanged(make: Make) -> None:
    runtime, _ = await make(guarded(NO_ABUSE), ScriptedJudgmentProvider({"other": "yes"}))

    with pytest.raises(JudgmentScriptFailed, match=r"'abusive'"):
        await runtime.run(runtime.plan("helper", "s", "Hi"))


async def test_judgment_tokens_are_recorded_with_the_turns_messages(make: Make) -> None:
    judge = ScriptedJudgmentProvider({"abusive": "no"}, usage=SPENT)
    runtime, _ = await make(
        guarded(NO_ABUSE), judge, [{"text": "Hello.", "usage": {"input_tokens": 7}}]
    )

    await runtime.run(runtime.plan("helper", "s", "Hi"))
    summary = await runtime.summary("s")

    assert summary.judgment_usage == SPENT
    assert summary.usage == Usage(input_tokens=7)
    assert summary.messages == 2  # the record is no message: the conversation is unchanged
    kinds = [e.kind for e in await runtime.context.journal.store.read("s")]
    assert kinds == ["session_opened", "user_message", "assistant_message", "judgment_usage"]


async def test_judgment_tokens_of_a_refused_turn_are_recorded_alone(make: Make) -> None:
    judge = ScriptedJudgmentProvider({"abusive": "yes"}, usage=SPENT)
    runtime, _ = await make(guarded(NO_ABUSE), judge)

    with pytest.raises(Refused):
        await runtime.run(runtime.plan("helper", "s", "You are useless!"))
    with pytest.raises(Refused):
        await runtime.run(runtime.plan("helper", "s", "Still useless!"))

    summary = await runtime.summary("s")
    assert summary.judgment_usage == SPENT + SPENT
    assert summary.messages == 0


async def test_judgment_tokens_of_a_turn_that_writes_no_memory_are_recorded_alone(
    make: Make,
) -> None:
    judge = ScriptedJudgmentProvider({"abusive": "no"}, usage=SPENT)
    runtime, _ = await make(guarded(NO_ABUSE, write_memory=False), judge, [{"text": "Hi."}])

    await runtime.run(runtime.plan("helper", "s", "Hi"))

    summary = await runtime.summary("s")
    assert summary.judgment_usage == SPENT
    assert summary.messages == 0


async def test_an_output_guardrail_judges_the_answer(make: Make) -> None:
    service = Service("test")

    @service.agent("helper")
    def helper(request: TurnRequest) -> Turn:
        return Turn(message=request.message, output_guardrails=[NO_ABUSE])

    judge = ScriptedJudgmentProvider({"abusive": {"yes": 0.95, "no": 0.05}})
    runtime, _ = await make(service, judge, [{"text": "Go away."}])

    with pytest.raises(Refused, match=r"output guardrail 'abusive'"):
        await runtime.run(runtime.plan("helper", "s", "Hi"))

    assert judge.inquiries[0].text == "Go away."
    assert await runtime.messages("s") == []


async def test_a_judged_refusal_of_the_answer_keeps_the_call_and_the_judgment_together(
    make: Make,
) -> None:
    service = Service("test")

    @service.agent("helper")
    def helper(request: TurnRequest) -> Turn:
        return Turn(message=request.message, output_guardrails=[NO_ABUSE])

    judge = ScriptedJudgmentProvider({"abusive": "yes"}, usage=SPENT)
    answer = {"text": "Go away.", "usage": {"input_tokens": 9}}
    runtime, _ = await make(service, judge, [answer])

    with pytest.raises(Refused):
        await runtime.run(runtime.plan("helper", "s", "Hi"), caller="alice")

    entries = await runtime.context.journal.store.read("s")
    assert [e.kind for e in entries] == ["session_opened", "unwritten_calls", "judgment_usage"]
    summary = await runtime.summary("s", caller="alice")
    assert summary.judgment_usage == SPENT
    assert summary.tally.unwritten == Usage(input_tokens=9)
    assert summary.messages == 0
