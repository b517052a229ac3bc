"""The planner with delegation and repeated calls, as a specification (pure)."""

from __future__ import annotations

from ankka.runtime.declare.tools import tool
from ankka.runtime.engine.steps import (
    AwaitChildren,
    CallModel,
    Child,
    Delegate,
    Repeated,
    RunTool,
    Settle,
    TurnPlan,
    TurnState,
    next_step,
)
from ankka.runtime.records.messages import AssistantMessage, ToolCall, ToolResult, UserMessage


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


@tool
def delegate__r__s(instructions: str) -> str:
    """Stands for a delegation tool (never run)."""
    return instructions


DELEGATE = "delegate__r__s"
PLAN = TurnPlan(
    agent="a",
    instructions="",
    tools=(lookup, delegate__r__s),
    text_answers=False,
    delegations=frozenset({DELEGATE}),
    max_repeats=3,
)
TASK = UserMessage("the task", "a", "t#0")


def answer(*calls: tuple[str, str], turn: str = "t#1") -> AssistantMessage:
    made = tuple(ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(calls))
    return AssistantMessage(None, made, "a", turn)


def result(call: str, name: str = "lookup", content: str = "ok") -> ToolResult:
    return ToolResult(call, name, content, False, "a", "t#1")


def state(*produced: object, children: dict[str, Child] | None = None) -> TurnState:
    return TurnState(PLAN, (TASK,), list(produced), None, dict(children or {}))  # type: ignore[arg-type]


def test_a_delegation_call_without_a_child_makes_one() -> None:
    asked = answer((DELEGATE, '{"instructions": "x"}'))
    step = next_step(state(asked))
    assert isinstance(step, Delegate) and step.call is asked.tool_calls[0]


def test_calls_waiting_on_children_end_the_pass_once_the_rest_have_run() -> None:
    asked = answer((DELEGATE, '{"instructions": "x"}'), ("lookup", '{"key": "k"}'))
    waiting = {"c0": Child("t:1.0")}
    step = next_step(state(asked, children=waiting))
    assert isinstance(step, RunTool) and step.call.id == "c1"
    step = next_step(state(asked, result("c1"), children=waiting))
    assert step == AwaitChildren(asked, (asked.tool_calls[0],))


def test_a_childs_known_end_is_settled_as_its_calls_result_then_the_model_is_called() -> None:
    asked = answer((DELEGATE, '{"instructions": "x"}'), (DELEGATE, '{"instructions": "y"}'))
    ended = result("c1", DELEGATE, '{"status": "completed"}')
    children = {"c0": Child("t:1.0"), "c1": Child("t:1.1", ended)}
    step = next_step(state(asked, children=children))
    assert step == Settle(asked, asked.tool_calls[1], ended)
    first = result("c0", DELEGATE, '{"status": "failed"}')
    children["c0"] = Child("t:1.0", first)
    step = next_step(state(asked, ended, children=children))
    assert step == Settle(asked, asked.tool_calls[0], first)
    assert isinstance(next_step(state(asked, ended, first, children=children)), CallModel)


def test_a_result_already_recorded_is_never_settled_again() -> None:
    asked = answer((DELEGATE, '{"instructions": "x"}'))
    recorded = result("c0", DELEGATE, '{"status": "completed"}')
    again = {"c0": Child("t:1.0", recorded)}
    assert isinstance(next_step(state(asked, recorded, children=again)), CallModel)


def test_the_third_identical_call_stops_the_work_before_it_runs() -> None:
    same = ("lookup", '{"key": "k"}')
    one, two = answer(same, turn="t#1"), answer(same, turn="t#2")
    three = answer(("lookup", '{ "key":"k" }'), turn="t#3")  # spelt otherwise, the same call
    step = next_step(state(one, result("c0"), two, result("c0"), three))
    assert step == Repeated(three, three.tool_calls[0], 3)
    assert isinstance(next_step(state(one, result("c0"), three)), RunTool)


def test_identical_calls_in_one_answer_count_up_to_the_limit() -> None:
    same = ("lookup", '{"key": "k"}')
    many = answer(*([same] * 100))
    produced = [many, result("c0"), result("c1")]
    step = next_step(state(*produced))
    assert isinstance(step, Repeated) and step.call.id == "c2" and step.count == 3


def test_identical_delegations_count_too() -> None:
    same = (DELEGATE, '{"instructions": "x"}')
    many = answer(same, same, same)
    step = next_step(state(many, children={"c0": Child("t:1.0"), "c1": Child("t:1.1")}))
    assert isinstance(step, Repeated) and step.call.id == "c2"


def test_an_answers_delegation_calls_are_delegated_in_one_step() -> None:
    asked = answer(*((DELEGATE, f'{{"instructions": "{n}"}}') for n in "xyz"))
    step = next_step(state(asked))
    assert isinstance(step, Delegate) and step.calls == asked.tool_calls


def test_one_step_delegates_up_to_the_first_call_that_is_another_step() -> None:
    asked = answer(
        (DELEGATE, '{"instructions": "x"}'),
        (DELEGATE, '{"instructions": "y"}'),
        ("lookup", '{"key": "k"}'),
        (DELEGATE, '{"instructions": "z"}'),
    )
    step = next_step(state(asked, children={"c1": Child("t:1.1")}))
    assert isinstance(step, Delegate) and step.calls == (asked.tool_calls[0],)  # c1 waits
    step = next_step(state(asked))
    assert isinstance(step, Delegate) and step.calls == asked.tool_calls[:2]


def test_a_call_that_would_be_repeated_is_not_delegated_with_the_ones_before_it() -> None:
    same = (DELEGATE, '{"instructions": "x"}')
    asked = answer(same, (DELEGATE, '{"instructions": "y"}'), same, same)
    step = next_step(state(asked))
    assert isinstance(step, Delegate) and step.calls == asked.tool_calls[:3]
