"""The step planner, as a specification: a turn's state in, its next step out (pure)."""

from __future__ import annotations

from ankka.runtime.declare.tools import tool
from ankka.runtime.engine.steps import (
    CUT_OFF_RUN,
    AwaitDecision,
    CallModel,
    Decided,
    Ended,
    Finish,
    OutOfRounds,
    RunTool,
    Settle,
    TurnPlan,
    TurnState,
    Verdict,
    next_step,
)
from ankka.runtime.records.messages import AssistantMessage, ToolCall, ToolResult, UserMessage


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


@tool(requires_approval=True)
def publish(key: str) -> str:
    """Publish a key."""
    return key


@tool
def finish(reason: str) -> str:
    """End the work."""
    return reason


QUESTION = UserMessage("q", "a", "t")
PLAN = TurnPlan(agent="a", instructions="be brief", tools=(lookup, publish), max_rounds=2)


def answer(*names: str, text: str | None = None) -> AssistantMessage:
    calls = tuple(ToolCall(f"c{i}", n, '{"key": "k"}') for i, n in enumerate(names))
    return AssistantMessage(text, calls, "a", "t")


def result(call_id: str, name: str = "lookup", *, error: bool = False) -> ToolResult:
    return ToolResult(call_id, name, "done", error, "a", "t")


def state(*produced: object, plan: TurnPlan = PLAN, decided: Decided | None = None) -> TurnState:
    return TurnState(plan, (UserMessage("earlier", "a", "t0"),), list(produced), decided)  # type: ignore[arg-type]


def test_a_turn_with_nothing_answered_calls_the_model_with_the_context_then_the_turn() -> None:
    step = next_step(state(QUESTION))
    assert isinstance(step, CallModel)
    assert [m.content for m in step.request.messages] == ["earlier", "q"]
    assert [t.name for t in step.request.tools] == ["lookup", "publish"]
    assert step.request.instructions == "be brief"


def test_an_answer_without_tool_calls_finishes_a_request_turn() -> None:
    final = answer(text="done")
    assert next_step(state(QUESTION, final)) == Finish(final)


def test_an_answer_without_tool_calls_is_no_end_when_text_is_not_an_answer() -> None:
    plan = TurnPlan(agent="a", instructions="", tools=(lookup,), text_answers=False)
    assert isinstance(next_step(state(QUESTION, answer(text="hm"), plan=plan)), CallModel)


def test_the_calls_of_the_last_answer_run_one_at_a_time_in_order() -> None:
    asked = answer("lookup", "lookup")
    step = next_step(state(QUESTION, asked))
    assert isinstance(step, RunTool) and step.call.id == "c0" and step.tool is lookup
    step = next_step(state(QUESTION, asked, result("c0")))
    assert isinstance(step, RunTool) and step.call.id == "c1"
    assert isinstance(next_step(state(QUESTION, asked, result("c0"), result("c1"))), CallModel)


def test_a_call_of_a_tool_not_offered_is_run_as_none_naming_what_is() -> None:
    step = next_step(state(QUESTION, answer("nope")))
    assert isinstance(step, RunTool) and step.tool is None
    assert step.offered == ("lookup", "publish")


def test_calls_that_need_a_decision_stop_the_turn_before_any_call_of_the_answer_runs() -> None:
    asked = answer("lookup", "publish")
    step = next_step(state(QUESTION, asked))
    assert step == AwaitDecision(asked, (asked.tool_calls[1],))


def test_verdicts_settle_refused_calls_and_run_approved_ones_after_their_start() -> None:
    asked = answer("publish", "publish")
    verdicts = {"c0": Verdict("apr_0", "approved", ""), "c1": Verdict("apr_1", "refused", "no")}
    decided = Decided(asked, verdicts)
    step = next_step(state(QUESTION, asked, decided=decided))
    assert isinstance(step, RunTool) and step.approved == verdicts["c0"]
    step = next_step(state(QUESTION, asked, result("c0", "publish"), decided=decided))
    assert isinstance(step, Settle) and step.result.is_error
    assert "a person refused this call" in step.result.content and ": no" in step.result.content


def test_an_approved_call_whose_start_was_recorded_is_never_run_again() -> None:
    asked = answer("publish")
    decided = Decided(asked, {"c0": Verdict("apr_0", "approved", "")}, frozenset({"c0"}))
    step = next_step(state(QUESTION, asked, decided=decided))
    assert isinstance(step, Settle) and step.result.content == CUT_OFF_RUN


def test_verdicts_on_another_answer_decide_nothing() -> None:
    other = answer("publish", text="another")
    asked = answer("publish")
    decided = Decided(other, {"c0": Verdict("apr_0", "approved", "")})
    assert isinstance(next_step(state(QUESTION, asked, decided=decided)), AwaitDecision)


def test_the_model_still_asking_for_tools_past_the_limit_is_out_of_rounds() -> None:
    one, two, three = answer("lookup"), answer("lookup"), answer("lookup")
    produced = (QUESTION, one, result("c0"), two, result("c0"), three)
    assert next_step(state(*produced)) == OutOfRounds(2)


def test_an_ending_tool_that_answered_without_error_ends_the_work() -> None:
    plan = TurnPlan(agent="a", instructions="", tools=(finish,), ending=frozenset({"finish"}))
    asked = answer("finish")
    ended = result("c0", "finish")
    assert next_step(state(QUESTION, asked, ended, plan=plan)) == Ended(asked.tool_calls[0], ended)
    failed = result("c0", "finish", error=True)
    assert isinstance(next_step(state(QUESTION, asked, failed, plan=plan)), CallModel)


def test_a_required_tool_choice_is_asked_of_the_model() -> None:
    plan = TurnPlan(agent="a", instructions="", tools=(lookup,), tool_choice="required")
    step = next_step(state(QUESTION, plan=plan))
    assert isinstance(step, CallModel) and step.request.tool_choice == "required"
