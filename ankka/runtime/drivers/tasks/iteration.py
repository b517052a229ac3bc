"""The iteration loop: one task, worked until it ends. The platform's, not the agent's.

Every iteration records, in order: the model's response in the journal session ``task:<id>``,
in one append with the iteration's marks (:mod:`.marks`: started, completed with the call's
usage); then the completion on the task record (its count and usage, once); then each tool
result (the journal, one append per tool). Three commits an iteration, two without tools.
The loop re-reads the records at every boundary and resumes from the last one
(:func:`.decide.resume_point`), so an instance stopped anywhere in that sequence carries on
with no recorded model call made again; a completion recorded in the journal but not on the
task record is carried over from the journal; a tool whose result was not recorded runs
again (tools run at least once).

Failures that decide nothing (a model call that failed, a rule or guardrail that raised) are
retried after a growing pause without spending budget, and counted: ``max_consecutive_failures``
in a row fail the task with the last error. An error that says a retry cannot help
(``ModelError.retryable``: a refused key, a scripted provider out of script) fails it at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ankka._kernel.clock import Clock
from ankka._kernel.errors import (
    ConfigurationError,
    ModelError,
    Refused,
    StoreError,
)
from ankka.runtime.declare.autonomous import COMPLETE_TASK, FAIL_TASK, AutonomousAgent, TaskType
from ankka.runtime.declare.guardrails import first_refusal
from ankka.runtime.declare.judgments.guardrail import Judging
from ankka.runtime.declare.judgments.seam import JudgmentProvider
from ankka.runtime.drivers.tasks.decide import (
    ACCEPTED,
    ENDED_AS_FAILED,
    CallModel,
    Decoded,
    Ends,
    Malformed,
    RuleRaised,
    RunTools,
    check_rules,
    decode_fail,
    decode_result,
    result_json,
    resume_point,
)
from ankka.runtime.drivers.tasks.notify import Notifier
from ankka.runtime.drivers.tasks.prompt import NEAR_END, NUDGE, IterationPlan, plan_iteration
from ankka.runtime.engine.loop import decided_result
from ankka.runtime.features.approval_gate import CUT_OFF_RUN, Gate, gate
from ankka.runtime.providers.base import ModelProvider, ModelResponse
from ankka.runtime.providers.retry import Retried
from ankka.runtime.records.fold import apply
from ankka.runtime.records.iterations import IterationCompleted, IterationStarted
from ankka.runtime.records.judgments import JudgmentUsage
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ModelCall,
    ToolResult,
    Usage,
    UserMessage,
)
from ankka.runtime.records.registry import Record
from ankka.runtime.records.session import SessionOpened
from ankka.runtime.records.tasks import InstanceState, TaskRecord, TaskState
from ankka.runtime.store import task_statements as statements
from ankka.runtime.store.approval_index import ApprovalIndex
from ankka.runtime.store.journal import Journal
from ankka.runtime.store.journal_store import ConcurrentAppend
from ankka.runtime.store.tasks import Ended, TaskStore

__all__ = ["LeaseLost", "RetryPolicy", "Workbench", "publish_ended", "work_task"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The pause before attempt ``n + 1`` after ``n`` failures in a row: doubling, capped."""

    first_pause: float = 0.5
    max_pause: float = 30.0

    def pause(self, failures: int) -> float:
        return float(min(self.max_pause, self.first_pause * 2 ** max(0, failures - 1)))


@dataclass(frozen=True, slots=True)
class Workbench:
    """What the loop works with: the seams (stores, providers) and the injected clock."""

    store: TaskStore
    journal: Journal
    providers: Mapping[str, ModelProvider]
    clock: Clock
    notifier: Notifier
    sleep: Callable[[float], Awaitable[None]]
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    approvals: ApprovalIndex | None = None
    # The service's judgment providers, for judged guardrails (the request loop's Runtime.judges).
    judges: Mapping[str, JudgmentProvider] = field(default_factory=dict)
    # Told of every model call the loop made (agent, call), e.g. the runtime's /metrics; a
    # call counts when it is made, so a resumed iteration (whose call is recorded) adds none.
    calls_made: Callable[[str, Sequence[ModelCall]], None] | None = None
    # Told of each model call made again after a retryable failure (provider, model, kind):
    # this loop is a task's one retry layer (the providers under it retry nothing).
    retried: Retried | None = None


class LeaseLost(StoreError):
    """Another process wrote this task's records: this one no longer owns its instance."""

    kind = "lease_lost"


class _End(Exception):
    def __init__(
        self, state: TaskState, reason: str | None = None, result: dict[str, Any] | None = None
    ) -> None:
        super().__init__(reason or state.value)
        self.state = state
        self.reason = reason
        self.result = result


_END_EVENTS = {
    TaskState.COMPLETED: "task_completed",
    TaskState.FAILED: "task_failed",
    TaskState.CANCELLED: "task_cancelled",
}


def publish_ended(notifier: Notifier, ended: list[Ended]) -> None:
    for item in ended:
        notifier.publish(
            _END_EVENTS[item.state],
            agent=item.agent,
            instance=item.instance,
            task=item.id,
            reason=item.reason,
        )


def _tell(
    bench: Workbench, event: str, agent: AutonomousAgent, task: TaskRecord, **data: Any
) -> None:
    bench.notifier.publish(event, agent=agent.name, instance=task.instance, task=task.id, **data)


@dataclass
class _Failures:
    """Attempts that decided nothing, in a row, for one task."""

    bench: Workbench
    agent: AutonomousAgent
    task: TaskRecord
    count: int = 0

    async def failed(self, error: str, *, condition: str) -> None:
        self.count += 1
        bench, agent, task = self.bench, self.agent, self.task
        _tell(bench, "iteration_failed", agent, task, error=error, consecutive=self.count)
        if condition == "model_calls_failing" and bench.notifier.once(task.id, condition):
            _tell(bench, condition, agent, task, error=error)
        if self.count >= self.agent.max_consecutive_failures:
            raise _End(
                TaskState.FAILED,
                f"{self.count} attempts in a row failed (the agent's max_consecutive_failures); "
                f"the last: {error}",
            )
        await self.bench.sleep(self.bench.retry.pause(self.count))


async def work_task(bench: Workbench, agent: AutonomousAgent, task: TaskRecord) -> None:
    """Work ``task`` until it ends, its instance stops (suspended, terminated), or it is
    cancelled. Raises :class:`LeaseLost` when another process took the task's records over."""
    try:
        await _work(bench, agent, task)
    except _End as end:
        finished = end
        ended = await bench.store.write(
            lambda tx: statements.finish(
                tx,
                task.id,
                finished.state,
                result=finished.result,
                reason=finished.reason,
                now=bench.clock.now(),
            )
        )
        publish_ended(bench.notifier, ended)


async def _work(bench: Workbench, agent: AutonomousAgent, task: TaskRecord) -> None:
    accepts = agent.accepted(task.spec.type)
    if accepts is None:
        raise _End(
            TaskState.FAILED,
            f"agent {agent.name!r} does not accept task type {task.spec.type!r} (any more)",
        )
    failures = _Failures(bench, agent, task)
    instance = task.instance
    assert instance is not None, "a task is worked by the instance it is assigned to"
    if not task.started:
        await _input_guardrails(bench, agent, task, failures)
        # The task starts and, with no model call between, so does its first iteration.
        started = await bench.store.write(
            lambda tx: statements.update(
                tx,
                task.id,
                bench.clock.now(),
                state=TaskState.IN_PROGRESS.value,
                started=1,
                iteration_started=max(1, task.iterations_used + 1),
            ),
            serial=False,
        )
        if started is None:
            return
        _tell(bench, "task_started", agent, task)
    dependency_results = await _dependency_results(bench, task)
    while True:
        current: TaskRecord | None = await bench.store.read(lambda tx: statements.get(tx, task.id))
        if current is None or current.final or current.instance != instance:
            return  # ended elsewhere, or its instance was terminated
        position, history, completed = await _history(bench.journal, current.session)
        if await _complete_recorded(bench, current, completed):
            continue  # read the record again, with those iterations counted
        point = resume_point(history)
        if isinstance(point, Ends):
            raise _settled(accepts.task_type, point)
        if isinstance(point, RunTools):
            waiting = await _run_tools(
                bench, agent, accepts.task_type, current, point, position, failures
            )
            if waiting:
                return  # no model call while a request awaits; a decision pokes the host
            continue
        assert isinstance(point, CallModel)
        # Between iterations: a cancelled task stops here, after its iteration's tools ran.
        if current.cancel_requested:
            raise _End(TaskState.CANCELLED, "cancelled")
        holder = await bench.store.read(
            lambda tx: statements.get_instance(tx, agent.name, instance)
        )
        if holder is None or holder.state != InstanceState.ACTIVE:
            return  # suspended: stop before the next model call
        if current.iterations_used >= current.budget:
            raise _End(
                TaskState.FAILED,
                f"the task reached its budget of {current.budget} iterations without ending "
                f"through {COMPLETE_TASK} or {FAIL_TASK}",
            )
        try:
            plan = plan_iteration(
                agent,
                accepts.task_type,
                current,
                providers=bench.providers,
                history=history,
                dependency_results=dependency_results,
            )
        except ConfigurationError as exc:
            raise _End(TaskState.FAILED, str(exc)) from exc
        await _iterate(bench, agent, current, plan, position, failures)


async def _iterate(
    bench: Workbench,
    agent: AutonomousAgent,
    task: TaskRecord,
    plan: IterationPlan,
    position: int,
    failures: _Failures,
) -> None:
    number = plan.iteration
    if task.state != TaskState.IN_PROGRESS:
        # Back to work after a rejected result (the start itself is a journal mark below).
        await bench.store.write(
            partial(
                statements.update,
                task=task.id,
                now=bench.clock.now(),
                state=TaskState.IN_PROGRESS.value,
            ),
            serial=False,
        )
    _tell(bench, "iteration_started", agent, task, iteration=number, budget=task.budget)
    response, call = await _call(bench, agent, plan, failures)
    turn = f"{task.id}#{number}"
    recorded: list[Record] = [
        IterationStarted(number),
        AssistantMessage(response.content, response.tool_calls, agent.name, turn, call),
    ]
    if not response.tool_calls:
        recorded.append(UserMessage(NUDGE, agent.name, turn))
    recorded.append(IterationCompleted(number, response.usage))
    if position == 0:
        # The session is its task's creator's, under its agent's policy, as the task is.
        recorded.insert(0, SessionOpened(task.created_by, task.spec.agent))
    await _append(bench.journal, task.session, recorded, position)
    await bench.store.write(
        lambda tx: statements.complete_iteration(
            tx, task.id, number, response.usage, bench.clock.now()
        ),
        serial=False,
    )
    _tell(
        bench,
        "iteration_completed",
        agent,
        task,
        iteration=number,
        budget=task.budget,
        usage=response.usage.as_dict(),
    )
    if task.budget - number <= NEAR_END and bench.notifier.once(task.id, "budget_approaching"):
        _tell(bench, "budget_approaching", agent, task, used=number, budget=task.budget)


async def _complete_recorded(
    bench: Workbench, task: TaskRecord, completed: dict[int, Usage]
) -> bool:
    """Record on the task every iteration the journal holds as completed and the task record
    does not (the process stopped between the two commits), with its usage: once each."""
    changed = False
    for number, usage in sorted(completed.items()):
        if number > task.iterations_used:
            await bench.store.write(
                partial(
                    statements.complete_iteration,
                    task=task.id,
                    number=number,
                    usage=usage,
                    now=bench.clock.now(),
                ),
                serial=False,
            )
            changed = True
    return changed


def _iteration_of(turn: str) -> int | None:
    """The iteration number of a response's turn, ``<task>#<n>``."""
    _, _, number = turn.rpartition("#")
    return int(number) if number.isdigit() else None


async def _call(
    bench: Workbench, agent: AutonomousAgent, plan: IterationPlan, failures: _Failures
) -> tuple[ModelResponse, ModelCall]:
    provider = plan.provider
    while True:
        started = bench.clock.monotonic()
        try:
            response = await provider.complete(plan.request)
        except ModelError as exc:
            if not exc.retryable:
                raise _End(TaskState.FAILED, str(exc)) from exc
            await failures.failed(str(exc), condition="model_calls_failing")
            if bench.retried is not None:  # failed() raised when no attempt is left
                bench.retried(provider.name, provider.model, exc.kind)
            continue
        failures.count = 0
        call = ModelCall(
            provider=provider.name,
            model=response.model or provider.model,
            agent=agent.name,
            latency_ms=(bench.clock.monotonic() - started) * 1000.0,
            usage=response.usage,
        )
        if bench.calls_made is not None:
            bench.calls_made(agent.name, (call,))
        return response, call


async def _input_guardrails(
    bench: Workbench, agent: AutonomousAgent, task: TaskRecord, failures: _Failures
) -> None:
    judging = Judging(bench.judges)
    try:
        while True:
            try:
                await first_refusal(
                    agent.input_guardrails,
                    task.spec.instructions,
                    stage="input",
                    judging=judging,
                )
                return
            except Refused as exc:
                raise _End(TaskState.FAILED, str(exc)) from exc
            except Exception as exc:
                # A guardrail that raised refused nothing: check again, as a failed iteration.
                error = f"an input guardrail raised {type(exc).__name__}: {exc}"
                await failures.failed(error, condition="checks_failing")
    finally:
        if judging.spent:
            position, _, _ = await _history(bench.journal, task.session)
            await _judged(bench, agent, task, judging, f"{task.id}#input", position)


async def _judged(
    bench: Workbench,
    agent: AutonomousAgent,
    task: TaskRecord,
    judging: Judging,
    turn: str,
    position: int,
) -> int:
    """Record what judged guardrails spent on ``task``: a ``judgment_usage`` record on its
    session (as a request turn's), summed on the task's ``usage``; the session's position."""
    if not judging.spent:
        return position
    records: list[Record] = [JudgmentUsage(judging.usage, agent.name, turn)]
    if position == 0:
        records.insert(0, SessionOpened(task.created_by, task.spec.agent))
    position = await _append(bench.journal, task.session, records, position)
    await bench.store.write(
        lambda tx: statements.add_usage(tx, task.id, judging.usage, bench.clock.now()),
        serial=False,
    )
    return position


async def _run_tools(
    bench: Workbench,
    agent: AutonomousAgent,
    task_type: TaskType,
    task: TaskRecord,
    point: RunTools,
    position: int,
    failures: _Failures,
) -> bool:
    """Run the last response's pending calls; True when some wait for a decision."""
    turn = point.response.turn
    gated = await _approval_gate(bench, agent, task, point)
    if gated is not None and gated.waiting:
        return True
    if gated is not None:
        position = gated.position
    for call in point.pending:
        end: _End | None = None
        rejected: str | None = None
        if call.name == COMPLETE_TASK:
            judging = Judging(bench.judges)
            content, is_error, end, rejected = await _judge(
                bench, agent, task_type, call.arguments, failures, judging
            )
            position = await _judged(bench, agent, task, judging, turn, position)
        elif call.name == FAIL_TASK:
            reason = decode_fail(call.arguments)
            if isinstance(reason, Malformed):
                content, is_error = reason.message, True
            else:
                content, is_error, end = ENDED_AS_FAILED, False, _End(TaskState.FAILED, reason)
        else:
            found = agent.tool(call.name)
            if found is None:
                offered = ", ".join([*(t.name for t in agent.tools), COMPLETE_TASK, FAIL_TASK])
                content = f"there is no tool named {call.name!r}; the tools offered are: {offered}"
                is_error = True
            else:
                verdict = gated.verdicts.get(call.id) if gated is not None else None
                if gated is not None and verdict is not None and verdict.decision != "approved":
                    decided = decided_result(call, verdict, agent.name, turn)
                    content, is_error = decided.content, True
                elif gated is not None and verdict is not None and call.id in gated.started:
                    content, is_error = CUT_OFF_RUN, True  # at most once: never run again
                else:
                    if gated is not None and verdict is not None:
                        # The start is recorded before the run: it spends the approval.
                        start = gated.start_record(call)
                        position = await _append(bench.journal, task.session, [start], position)
                    outcome = await found.run(call.arguments)
                    content, is_error = outcome.content, outcome.is_error
        result = ToolResult(call.id, call.name, content, is_error, agent.name, turn)
        position = await _append(bench.journal, task.session, [result], position)
        if end is not None:
            raise end
        if rejected is not None:
            await bench.store.write(
                partial(
                    statements.update,
                    task=task.id,
                    now=bench.clock.now(),
                    state=TaskState.RESULT_REJECTED.value,
                    reason=rejected,
                ),
                serial=False,
            )
            _tell(bench, "task_result_rejected", agent, task, reason=rejected)
    return False


async def _approval_gate(
    bench: Workbench, agent: AutonomousAgent, task: TaskRecord, point: RunTools
) -> Gate | None:
    """Where the response's calls stand with approval; records the requests (and the task's
    ``awaiting-approval``) the first time, and ``in-progress`` again once all are decided."""

    def tool_of(call: Any) -> Any:
        return agent.tool(call.name)

    def needs(call: Any) -> bool:
        found = tool_of(call)
        return found is not None and found.needs_approval(call.arguments)

    gated = await gate(
        bench.journal,
        bench.approvals,
        session=task.session,
        agent=agent.name,
        turn=point.response.turn,
        calls=point.pending,
        rule_of=lambda call: getattr(tool_of(call), "approval", None),
        needs=needs,
        now=bench.clock.now(),
    )
    if gated is None:
        return None
    wanted = TaskState.AWAITING_APPROVAL if gated.waiting else TaskState.IN_PROGRESS
    if task.state != wanted:
        await bench.store.write(
            partial(statements.update, task=task.id, now=bench.clock.now(), state=wanted.value)
        )
    if gated.new:
        for request in gated.requests:
            _tell(bench, "approval_requested", agent, task, **request.shown())
    return gated


async def _judge(
    bench: Workbench,
    agent: AutonomousAgent,
    task_type: TaskType,
    arguments: str,
    failures: _Failures,
    judging: Judging,
) -> tuple[str, bool, _End | None, str | None]:
    """(tool result, is_error, the task's end, a rejection's reason) for a complete_task."""
    decoded = decode_result(task_type, arguments)
    if isinstance(decoded, Malformed):
        return decoded.message, True, None, None
    assert isinstance(decoded, Decoded)
    while True:
        try:
            refusal = check_rules(task_type, decoded.value)
            if refusal is None:
                await first_refusal(
                    agent.output_guardrails,
                    decoded.value.model_dump_json(),
                    stage="output",
                    judging=judging,
                )
            break
        except Refused as exc:
            refusal = (exc.by, exc.reason)
            break
        except RuleRaised as exc:
            await failures.failed(str(exc), condition="checks_failing")
        except Exception as exc:
            error = f"an output guardrail raised {type(exc).__name__}: {exc}"
            await failures.failed(error, condition="checks_failing")
    if refusal is not None:
        by, reason = refusal
        why = f"the result was rejected by {by}: {reason}"
        return why + f"; correct it and call {COMPLETE_TASK} again", True, None, why
    result = result_json(decoded.value)
    return ACCEPTED, False, _End(TaskState.COMPLETED, result=result), None


def _settled(task_type: TaskType, point: Ends) -> _End:
    """The end a recorded complete_task or fail_task already decided."""
    if point.completed:
        decoded = decode_result(task_type, point.arguments)
        assert isinstance(decoded, Decoded), "an accepted result decoded when it was judged"
        return _End(TaskState.COMPLETED, result=result_json(decoded.value))
    reason = decode_fail(point.arguments)
    assert isinstance(reason, str)
    return _End(TaskState.FAILED, reason)


async def _dependency_results(bench: Workbench, task: TaskRecord) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for dependency in task.spec.depends_on:
        record = await bench.store.read(partial(statements.get, task=dependency))
        results[dependency] = record.result if record is not None else None
    return results


async def _history(journal: Journal, session: str) -> tuple[int, list[Message], dict[int, Usage]]:
    """The session's last position, its conversation, and each completed iteration's usage:
    from its mark, or (a session recorded before the marks) from its response's model call."""
    position = 0
    conversation: list[Message] = []
    completed: dict[int, Usage] = {}
    for entry in await journal.read(session):
        record = entry.record
        apply(conversation, record)
        position = entry.seq
        if isinstance(record, IterationCompleted):
            completed[record.number] = record.usage
        elif isinstance(record, AssistantMessage) and record.call is not None:
            number = _iteration_of(record.turn)
            if number is not None:
                completed.setdefault(number, record.call.usage)
    return position, conversation, completed


async def _append(journal: Journal, session: str, messages: Sequence[Record], position: int) -> int:
    try:
        return await journal.append(session, messages, expected=position)
    except ConcurrentAppend as exc:
        raise LeaseLost(
            f"session {session!r} was written by another process; it owns the instance now"
        ) from exc
