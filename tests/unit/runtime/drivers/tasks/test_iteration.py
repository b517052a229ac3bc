"""The iteration loop on the scripted provider: every rule of how a task is worked."""

from __future__ import annotations

import asyncio
import itertools
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ankka._kernel.errors import ModelAuthenticationError, ModelUnavailable
from ankka.runtime.declare.agents import Service
from ankka.runtime.declare.guardrails import Guardrail
from ankka.runtime.drivers.tasks.host import TaskHost
from ankka.runtime.drivers.tasks.iteration import RetryPolicy
from ankka.runtime.providers.base import ModelRequest, ModelResponse
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.accounting import UnwrittenCalls
from ankka.runtime.records.iterations import IterationCompleted, IterationStarted
from ankka.runtime.records.messages import (
    AssistantMessage,
    ModelCall,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from ankka.runtime.records.registry import Record
from ankka.runtime.records.tasks import InstanceState, TaskSpec, TaskState
from ankka.runtime.store import task_statements as statements
from ankka.runtime.store.open import Store
from ankka.runtime.tasks import Accepts, AutonomousAgent, TaskType
from examples.tasks import lookup
from examples.tasks import service as example
from tests.support.eventually import eventually_async
from tests.unit.runtime.conftest import MakeHost, finished, put

LOOKUP = {"tool_calls": [{"name": "lookup", "arguments": {"topic": "ankka"}}]}
GOOD = {"title": "ankka", "points": ["an agent platform"]}


def complete(result: Any, **extra: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "complete_task", "arguments": result}], **extra}


def fail(reason: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "fail_task", "arguments": {"reason": reason}}]}


async def host_messages(host: TaskHost, task: str) -> list[Any]:
    return await host.context.journal.conversation(f"task:{task}")


class Flaky:
    """A provider that fails ``failures`` times (as a model that is down), then answers from
    its script: the model boundary's double for outages."""

    def __init__(self, failures: int, script: list[Any], *, error: Exception | None = None):
        self.failing = failures
        self.error = error or ModelUnavailable("default", "the server is unavailable (HTTP 503)")
        self.inner = ScriptedProvider(script, name="default")
        self.attempts = 0

    name = "default"
    model = "flaky"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.attempts += 1
        if self.failing > 0:
            self.failing -= 1
            raise self.error
        return await self.inner.complete(request)

    def stream(self, request: ModelRequest) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


def agent_service(**options: Any) -> Service:
    """The example's researcher, with other guardrails, rules or limits."""
    from examples.tasks import Summary, has_points

    rules = options.pop("rules", [has_points])
    budget = options.pop("budget", 5)
    kind = TaskType("summary", description="Summarise.", result=Summary, rules=rules)
    service = Service("test")
    service.autonomous(
        AutonomousAgent(
            name="researcher", tools=[lookup], accepts=[Accepts(kind, budget=budget)], **options
        )
    )
    return service


async def test_a_task_ends_with_its_typed_result_and_every_step_recorded_in_order(
    make_host: MakeHost,
) -> None:
    provider = ScriptedProvider(
        [
            {**LOOKUP, "usage": {"input_tokens": 10, "output_tokens": 2}},
            complete(GOOD, usage={"input_tokens": 20, "output_tokens": 3, "cache_read_tokens": 8}),
        ],
        name="default",
    )
    host = await make_host(example, provider)
    await put(host, "t1")
    record = await finished(host, "t1")
    assert record.state == TaskState.COMPLETED
    assert record.result == GOOD
    assert record.iterations_used == 2
    assert record.usage == Usage(30, 5, 8)
    recorded = await host_messages(host, "t1")
    assert [type(m).__name__ for m in recorded] == [
        "AssistantMessage",
        "ToolResult",
        "AssistantMessage",
        "ToolResult",
    ]
    assert recorded[1].content == "ankka is an agent platform for Kubernetes, in Python."
    assert [m.call.usage for m in recorded if isinstance(m, AssistantMessage) and m.call] == [
        Usage(10, 2),
        Usage(20, 3, 8),
    ]


async def test_the_model_is_shown_the_task_whole_with_both_built_in_tools(
    make_host: MakeHost,
) -> None:
    provider = ScriptedProvider([LOOKUP, complete(GOOD)], name="default")
    host = await make_host(example, provider)
    await put(host, "t1", "Summarise ankka for a newcomer.")
    await finished(host, "t1")
    first, second = provider.requests
    assert "Summarise a topic as a title" in first.instructions
    assert '"points"' in first.instructions  # the result schema
    assert "You research topics" in first.instructions
    assert first.instructions == second.instructions  # the same prefix every iteration
    assert [t.name for t in first.tools] == ["lookup", "complete_task", "fail_task"]
    complete_spec = first.tools[1]
    assert set(complete_spec.parameters["properties"]) == {"title", "points"}
    task_message = first.messages[0]
    assert isinstance(task_message, UserMessage)
    assert "Summarise ankka for a newcomer." in task_message.content
    assert second.messages[0].content == task_message.content  # shown again, never history
    assert [type(m).__name__ for m in second.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResult",
    ]


async def test_every_call_of_a_task_carries_its_task_types_output_token_limit(
    make_host: MakeHost,
) -> None:
    from examples.tasks import Summary

    brief = TaskType("summary", result=Summary, max_output_tokens=48)
    service = Service("brief")
    service.autonomous(
        AutonomousAgent(name="researcher", tools=[lookup], accepts=[Accepts(brief, budget=5)])
    )
    provider = ScriptedProvider([LOOKUP, complete(GOOD)], name="default")
    host = await make_host(service, provider)
    await put(host, "t1", "Summarise ankka.")
    await finished(host, "t1")
    assert [r.max_output_tokens for r in provider.requests] == [48, 48]


async def test_a_task_type_without_an_output_token_limit_sends_none(make_host: MakeHost) -> None:
    # Its own test, so its own store: a host of another service on the same store would
    # work this task too (both have a researcher).
    unbounded = ScriptedProvider([complete(GOOD)], name="default")
    other = await make_host(example, unbounded)
    await put(other, "t2", "Summarise ankka.")
    await finished(other, "t2")
    assert [r.max_output_tokens for r in unbounded.requests] == [None]


async def test_the_model_is_told_as_it_nears_the_end_in_the_newest_message_only(
    make_host: MakeHost,
) -> None:
    lookups = [
        {"tool_calls": [{"name": "lookup", "arguments": {"topic": t}}]}
        for t in ("ankka", "sqlite", "postgresql", "kubernetes")
    ]
    provider = ScriptedProvider([*lookups, complete(GOOD)], name="default")
    host = await make_host(example, provider)
    await put(host, "t1")
    assert (await finished(host, "t1")).state == TaskState.COMPLETED
    requests = provider.requests
    newest = [str(r.messages[-1].content) for r in requests]
    assert not any("iteration" in note for note in newest[:3])
    assert "This is iteration 4 of 5: 2 iterations remain" in newest[3]
    assert "This is iteration 5 of 5, the last" in newest[4]
    # What was sent once is never rewritten: each request opens with the one before it.
    for before, after in itertools.pairwise(requests):
        assert tuple(after.messages[: len(before.messages)]) == tuple(before.messages)
        assert after.instructions == before.instructions and after.tools == before.tools


async def test_a_budget_of_one_says_so_in_the_task_message(make_host: MakeHost) -> None:
    provider = ScriptedProvider([complete(GOOD)], name="default")
    host = await make_host(agent_service(budget=1), provider)
    await put(host, "t1")
    assert (await finished(host, "t1")).state == TaskState.COMPLETED
    assert "This is iteration 1 of 1, the last" in str(provider.requests[0].messages[0].content)


async def test_reaching_the_budget_fails_the_task_saying_so(make_host: MakeHost) -> None:
    provider = ScriptedProvider([LOOKUP, LOOKUP], name="default")
    host = await make_host(agent_service(budget=2), provider)
    await put(host, "t1")
    record = await finished(host, "t1")
    assert record.state == TaskState.FAILED
    assert record.reason is not None and "reached its budget of 2 iterations" in record.reason
    assert len(provider.requests) == 2


async def test_a_reply_calling_no_tool_is_accounted_and_asked_again_within_budget(
    make_host: MakeHost,
) -> None:
    text = {"text": "Let me think.", "usage": {"input_tokens": 7, "output_tokens": 1}}
    provider = ScriptedProvider([text, complete(GOOD)], name="default")
    host = await make_host(example, provider)
    await put(host, "t1")
    record = await finished(host, "t1")
    assert record.state == TaskState.COMPLETED
    assert record.iterations_used == 1  # the reply with no tool call spent no budget
    assert record.usage.input_tokens == 7  # but its tokens are counted
    # No synthetic message goes on from it: the model is asked the same request again,
    # which requires a tool call.
    first, second = provider.requests
    assert second.messages == first.messages
    assert first.tool_choice == second.tool_choice == "required"
    assert [type(m).__name__ for m in await host_messages(host, "t1")] == [
        "AssistantMessage",
        "ToolResult",
    ]
    entries = await host.context.journal.read("task:t1")
    unwritten = [e.record for e in entries if isinstance(e.record, UnwrittenCalls)]
    assert [(u.reason, u.usage.input_tokens) for u in unwritten] == [("no_tool_call", 7)]


async def test_a_result_that_does_not_decode_is_a_tool_error_the_model_corrects(
    make_host: MakeHost,
) -> None:
    provider = ScriptedProvider([complete({"title": "x"}), complete(GOOD)], name="default")
    host = await make_host(example, provider)
    await put(host, "t1")
    record = await finished(host, "t1")
    assert record.state == TaskState.COMPLETED and record.result == GOOD
    error = (await host_messages(host, "t1"))[1]
    assert isinstance(error, ToolResult) and error.is_error
    assert "does not decode as a 'summary' result (points: Field required)" in error.content
    assert provider.requests[1].messages[-1] == error


async def test_a_rule_refusal_rejects_the_result_and_the_model_tries_again_in_budget(
    make_host: MakeHost,
) -> None:
    script = [complete({"title": "x", "points": []}), complete(GOOD)]
    provider = ScriptedProvider(script, name="default")
    host = await make_host(example, provider)
    with host.notifier.subscribe(("task", "t1")) as watching:
        await put(host, "t1")
        record = await finished(host, "t1")
        seen = []
        while watching._buffer:
            item = await watching.next()
            seen.append(getattr(item, "event", None))
    assert record.state == TaskState.COMPLETED and record.iterations_used == 2
    rejection = (await host_messages(host, "t1"))[1]
    assert rejection.is_error
    assert "rejected by rule 'has_points': a summary needs at least one point" in rejection.content
    assert "task_result_rejected" in seen


async def test_a_result_refused_by_an_output_guardrail_is_rejected(make_host: MakeHost) -> None:
    def no_secrets(text: str) -> str | None:
        return "it names a secret" if "secret" in text else None

    service = agent_service(output_guardrails=[Guardrail("no_secrets", no_secrets)])
    script = [complete({"title": "secret", "points": ["p"]}), complete(GOOD)]
    host = await make_host(service, ScriptedProvider(script, name="default"))
    await put(host, "t1")
    assert (await finished(host, "t1")).state == TaskState.COMPLETED
    rejection = (await host_messages(host, "t1"))[1]
    assert "output guardrail 'no_secrets': it names a secret" in rejection.content


async def test_a_rule_that_raises_decides_nothing_and_is_checked_again(
    make_host: MakeHost,
) -> None:
    calls: list[int] = []

    def flaky_rule(result: BaseModel) -> str | None:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("the rule's lookup failed")
        return None

    host = await make_host(
        agent_service(rules=[flaky_rule]), ScriptedProvider([complete(GOOD)], name="default")
    )
    await put(host, "t1")
    record = await finished(host, "t1")
    assert record.state == TaskState.COMPLETED and len(calls) == 3
    assert record.iterations_used == 1


async def test_a_rule_that_always_raises_fails_the_task_after_the_limit_not_for_ever(
    make_host: MakeHost,
) -> None:
    def broken(result: BaseModel) -> str | None:
        raise ValueError("broken rule")

    service = agent_service(rules=[broken], max_consecutive_failures=3)
    host = await make_host(service, ScriptedProvider([complete(GOOD)], name="default"))
    await put(host, "t1")
    record = await finished(host, "t1")
    assert record.state == TaskState.FAILED
    assert record.reason is not None
    assert "3 attempts in a row failed" in record.reason
    assert "rule 'broken' raised ValueError: broken rule" in record.reason


async def test_an_input_guardrail_refusal_fails_the_task_before_any_model_call(
    make_host: MakeHost,
) -> None:
    def no_shouting(text: str) -> str | None:
        return "please do not shout" if text.isupper() else None

    provider = ScriptedProvider([complete(GOOD)], name="default")
    host = await make_host(
        agent_service(input_guardrails=[Guardrail("no_shouting", no_shouting)]), provider
    )
    await put(host, "t1", "SUMMARISE ANKKA")
    record = await finished(host, "t1")
    assert record.state == TaskState.FAILED
    assert record.reason == "refused by input guardrail 'no_shouting': please do not shout"
    assert provider.requests == []


async def test_an_input_guardrail_that_raises_at_task_start_is_a_counted_failure(
    make_host: MakeHost,
) -> None:
    attempts: list[str] = []

    def broken(text: str) -> str | None:
        attempts.append(text)
        raise ConnectionError("the checker is down")

    provider = ScriptedProvider([complete(GOOD)], name="default")
    service = agent_service(input_guardrails=[Guardrail("broken", broken)])
    host = await make_host(service, provider)
    await put(host, "t1")
    record = await finished(host, "t1")
    assert record.state == TaskState.FAILED and len(attempts) == 5  # the default limit
    assert record.reason is not None and "input guardrail raised ConnectionError" in record.reason
    assert provider.requests == []


async def test_a_failed_model_call_is_retried_without_spending_budget(
    make_host: MakeHost,
) -> None:
    provider = Flaky(3, [complete(GOOD)])
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    host = await make_host(
        example, provider, sleep=sleep, retry=RetryPolicy(first_pause=0.5, max_pause=30)
    )
    await put(host, "t1")
    record = await finished(host, "t1")
    assert record.state == TaskState.COMPLETED and record.iterations_used == 1
    assert provider.attempts == 4
    assert pauses == [0.5, 1.0, 2.0]  # a growing pause


async def test_too_many_failed_model_calls_in_a_row_fail_the_task_with_the_last_error(
    make_host: MakeHost,
) -> None:
    provider = Flaky(10, [complete(GOOD)])
    host = await make_host(agent_service(max_consecutive_failures=4), provider)
    await put(host, "t1")
    record = await finished(host, "t1")
    assert record.state == TaskState.FAILED and provider.attempts == 4
    assert record.reason is not None
    assert "4 attempts in a row failed" in record.reason
    assert "model provider 'default' failed: the server is unavailable (HTTP 503)" in record.reason
    assert record.iterations_used == 0


async def test_a_refused_key_fails_the_task_at_once(make_host: MakeHost) -> None:
    error = ModelAuthenticationError("default", "the server refused the credentials")
    provider = Flaky(10, [complete(GOOD)], error=error)
    host = await make_host(example, provider)
    await put(host, "t1")
    record = await finished(host, "t1")
    assert record.state == TaskState.FAILED and provider.attempts == 1


async def test_a_scripted_provider_that_runs_out_fails_at_once_whatever_its_name(
    make_host: MakeHost,
) -> None:
    provider = ScriptedProvider([LOOKUP], name="openai")
    host = await make_host(example, provider)
    await put(host, "t1")
    record = await finished(host, "t1")
    assert record.state == TaskState.FAILED
    assert record.reason is not None and "the script ran out" in record.reason
    assert len(provider.requests) == 2  # no retries


async def test_fail_task_ends_the_task_with_its_reason(make_host: MakeHost) -> None:
    host = await make_host(example, ScriptedProvider([fail("nothing known")], name="default"))
    await put(host, "t1")
    record = await finished(host, "t1")
    assert record.state == TaskState.FAILED and record.reason == "nothing known"


async def test_usage_is_summed_once_per_call(make_host: MakeHost) -> None:
    usage = {"input_tokens": 7, "output_tokens": 1, "cache_write_tokens": 2}
    script = [{**LOOKUP, "usage": usage}, {**LOOKUP, "usage": usage}, complete(GOOD, usage=usage)]
    host = await make_host(example, ScriptedProvider(script, name="default"))
    await put(host, "t1")
    assert (await finished(host, "t1")).usage == Usage(21, 3, 0, 6)


async def test_dependency_results_are_shown_when_a_task_starts(make_host: MakeHost) -> None:
    provider = ScriptedProvider([complete(GOOD), complete(GOOD)], name="default")
    host = await make_host(example, provider)
    await put(host, "first", instance="i")
    await put(host, "second", depends_on=["first"], instance="i")
    assert (await finished(host, "second")).state == TaskState.COMPLETED
    shown = str(provider.requests[1].messages[0].content)
    assert "Result of task first" in shown and json.dumps(GOOD) in shown


async def test_a_failed_dependency_cancels_its_dependants_which_never_start(
    make_host: MakeHost,
) -> None:
    provider = ScriptedProvider([fail("cannot")], name="default")
    host = await make_host(example, provider)
    await put(host, "root", instance="i")
    await put(host, "child", depends_on=["root"], instance="j")
    await put(host, "grandchild", depends_on=["child"], instance="k")
    assert (await finished(host, "grandchild")).state == TaskState.CANCELLED
    assert (await finished(host, "child")).reason == "it depends on 'root', which was failed"
    assert len(provider.requests) == 1


class Gate:
    """A provider whose calls wait until the test lets each one through."""

    def __init__(self, script: list[Any]) -> None:
        self.inner = ScriptedProvider(script, name="default")
        self.waiting = asyncio.Semaphore(0)
        self.arrived = asyncio.Event()

    name = "default"
    model = "gate"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.arrived.set()
        await self.waiting.acquire()
        return await self.inner.complete(request)

    def stream(self, request: ModelRequest) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


async def test_cancelling_a_working_task_stops_it_at_the_end_of_its_iteration(
    make_host: MakeHost,
) -> None:
    gate = Gate([LOOKUP, complete(GOOD)])
    host = await make_host(example, gate)
    await put(host, "t1")
    await asyncio.wait_for(gate.arrived.wait(), 5)
    cancelling = await host.cancel("t1")
    assert cancelling.state == TaskState.IN_PROGRESS and cancelling.cancel_requested
    gate.waiting.release()
    record = await finished(host, "t1")
    assert record.state == TaskState.CANCELLED and record.iterations_used == 1
    assert len(gate.inner.requests) == 1
    assert [type(m).__name__ for m in await host_messages(host, "t1")] == [
        "AssistantMessage",
        "ToolResult",
    ]


async def test_a_suspended_instance_stops_before_its_next_model_call_and_resumes(
    make_host: MakeHost,
) -> None:
    gate = Gate([LOOKUP, complete(GOOD)])
    host = await make_host(example, gate)
    await put(host, "t1", instance="i")
    await asyncio.wait_for(gate.arrived.wait(), 5)
    await host.set_instance("researcher", "i", InstanceState.SUSPENDED)
    gate.waiting.release()

    async def stopped() -> bool:
        return not host._workers

    await eventually_async(stopped, what="the suspended instance's worker to stop", timeout=5)
    view = await host.instance("researcher", "i")
    assert view.record.state == InstanceState.SUSPENDED and view.current == "t1"
    assert len(gate.inner.requests) == 1
    await host.set_instance("researcher", "i", InstanceState.ACTIVE)
    gate.waiting.release()
    assert (await finished(host, "t1")).state == TaskState.COMPLETED


async def test_a_restarted_host_never_repeats_a_recorded_model_call_and_reruns_a_tool(
    make_host: MakeHost,
) -> None:
    runs: list[str] = []
    started = asyncio.Event()
    hold = asyncio.Event()

    from ankka.runtime.declare.tools import tool

    @tool
    async def slow_lookup(topic: str) -> str:
        """Looks a topic up, slowly."""
        runs.append(topic)
        started.set()
        await hold.wait()
        return "found"

    from examples.tasks import Summary

    kind = TaskType("summary", result=Summary)
    service = Service("test")
    service.autonomous(
        AutonomousAgent(name="researcher", tools=[slow_lookup], accepts=[Accepts(kind, 5)])
    )
    call = {"tool_calls": [{"name": "slow_lookup", "arguments": {"topic": "ankka"}}]}
    first = ScriptedProvider([call], name="default")
    host = await make_host(service, first)
    await put(host, "t1")
    await asyncio.wait_for(started.wait(), 5)
    await host.__aexit__(None, None, None)  # the process stops during the tool
    hold.set()
    second = ScriptedProvider([complete(GOOD)], name="default")
    again = await make_host(service, second)
    record = await finished(again, "t1")
    assert record.state == TaskState.COMPLETED
    assert len(first.requests) == 1 and len(second.requests) == 1
    assert runs == ["ankka", "ankka"]  # at least once: its result was not recorded
    assert record.iterations_used == 2


async def recorded_without_completion(tmp_path: Path, marked: bool) -> None:
    """What a process killed between recording a response and its completion on the task
    record leaves behind: iteration 1's lookup response (with its marks when ``marked``)."""
    now = datetime.now(UTC)
    opened = await Store.open(tmp_path / "store.sqlite3")
    journal, store = opened.journal, opened.tasks
    spec = TaskSpec("researcher", "summary", "Summarise ankka.")
    await store.write(
        lambda tx: statements.put(
            tx,
            "t1",
            spec,
            instance=None,
            budget=5,
            created_by="local",
            may_read=statements.read_any,
            now=now,
        )
    )
    await store.write(
        lambda tx: statements.update(
            tx, "t1", now, state="in-progress", started=1, iteration_started=1
        )
    )
    call = ModelCall("default", "scripted", "researcher", 1.0, Usage(10, 2))
    lookup_call = ToolCall("c1", "lookup", '{"topic": "ankka"}')
    response = AssistantMessage(None, (lookup_call,), "researcher", "t1#1", call)
    records: list[Record] = [response]
    if marked:
        records = [IterationStarted(1), response, IterationCompleted(1, Usage(7, 3))]
    await journal.append("task:t1", records, expected=0)
    await opened.close()


async def test_a_response_recorded_without_its_completion_is_counted_once_on_resume(
    make_host: MakeHost, tmp_path: Path
) -> None:
    # A session recorded before the marks existed: the response's model call is the mark.
    await recorded_without_completion(tmp_path, marked=False)
    provider = ScriptedProvider([complete(GOOD, usage={"input_tokens": 5})], name="default")
    host = await make_host(example, provider)
    record = await finished(host, "t1")
    assert record.state == TaskState.COMPLETED
    assert record.iterations_used == 2 and record.usage == Usage(15, 2)
    assert len(provider.requests) == 1  # the recorded call was not made again
    assert provider.requests[0].messages[-1].content == (
        "ankka is an agent platform for Kubernetes, in Python."
    )


async def test_an_agent_whose_model_is_not_configured_fails_its_task_naming_the_setting(
    make_host: MakeHost,
) -> None:
    host = await make_host(agent_service(model="big"), ScriptedProvider([], name="default"))
    await put(host, "t1")
    record = await finished(host, "t1")
    assert record.state == TaskState.FAILED
    assert record.reason is not None and "ANKKA_MODEL_BIG_PRESET" in record.reason


async def test_a_completion_marked_in_the_journal_only_is_counted_once_with_its_usage(
    make_host: MakeHost, tmp_path: Path
) -> None:
    # The mark's usage is what the task is charged.
    await recorded_without_completion(tmp_path, marked=True)
    provider = ScriptedProvider([complete(GOOD, usage={"input_tokens": 5})], name="default")
    host = await make_host(example, provider)
    record = await finished(host, "t1")
    assert record.state == TaskState.COMPLETED
    assert record.iterations_used == 2 and record.usage == Usage(12, 3)
    assert len(provider.requests) == 1  # the recorded call was not made again
    kinds = [e.record.kind for e in await host.context.journal.read("task:t1")]
    assert kinds[:3] == ["iteration_started", "assistant_message", "iteration_completed"]
    # the second iteration's response and marks went in one append, after the tool result
    assert kinds[4:7] == ["iteration_started", "assistant_message", "iteration_completed"]
