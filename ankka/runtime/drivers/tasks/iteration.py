"""Task iterations: an autonomous agent's task worked over the engine, until it ends.

The task driver of the one loop (:func:`ankka.runtime.engine.loop.drive`). It differs from a
request turn only in its hooks (:class:`TaskWork`): how it commits and how it ends.

- Before each model call it checks the task's record (as the iteration's last commit read it
  back, or read now): a cancelled task stops here (at the end of the iteration before), a
  suspended instance stops before the call, a spent budget fails the task; the agent's MCP
  servers list their tools for the iteration.
- Every answer is recorded at once in the journal session ``task:<id>``, in one append with
  the iteration's marks (:mod:`ankka.runtime.records.iterations`: started, completed with the
  call's usage) and, in the same transaction, the completion on the task record (its count
  and usage, once). So an iteration with one tool call is two store round trips. An answer
  that calls no tool is no answer of a task's (its requests require a tool call): the call is
  accounted, and it is a failed attempt, made again without spending budget.
- Every tool result is recorded as it comes, in order. The newest one, when the end is near,
  carries where the next iteration stands in the budget (nothing earlier is ever rewritten).
- A task ends only through ``complete_task`` / ``fail_task`` (:mod:`.ending`), or its budget.

A restarted instance resumes from the records (the planner reads them): a recorded model call
is never made again, a tool whose result was not recorded runs again (at least once).
Failures that decide nothing (a model call that failed, a rule or guardrail that raised) are
retried after a growing pause without spending budget, and counted:
``max_consecutive_failures`` in a row fail the task with the last error. An error that says a
retry cannot help (``ModelError.retryable``: a refused key, a scripted provider out of script)
fails it at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar

from ankka._kernel.errors import ConfigurationError, ModelError, Refused, StoreError
from ankka.runtime.declare.autonomous import COMPLETE_TASK, FAIL_TASK, AutonomousAgent, TaskType
from ankka.runtime.declare.tools import RunnableTool
from ankka.runtime.drivers.approvals import need_index
from ankka.runtime.drivers.context import Context, Listed
from ankka.runtime.drivers.elicitations import ElicitationDesk, TurnAsker, sampling_of
from ankka.runtime.drivers.tasks import prompt
from ankka.runtime.drivers.tasks.decide import Decoded, decode_fail, decode_result, result_json
from ankka.runtime.drivers.tasks.delegation import Delegations, note_of, tools_of
from ankka.runtime.drivers.tasks.ending import CompleteTask, FailTask
from ankka.runtime.drivers.tasks.notify import Notice, Notifier
from ankka.runtime.engine.loop import Stopped, drive
from ankka.runtime.engine.planning import provider_for
from ankka.runtime.engine.session import SessionState
from ankka.runtime.engine.steps import (
    AwaitChildren,
    AwaitDecision,
    Decided,
    Ended,
    Repeated,
    RunTool,
    TurnPlan,
    TurnState,
    Verdict,
)
from ankka.runtime.features.mcp.asking import asking
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.records.accounting import UnwrittenCalls
from ankka.runtime.records.approvals import (
    ApprovalDecided,
    ApprovedCallStarted,
    TurnSuspended,
    requests_for,
)
from ankka.runtime.records.compaction import CompactionRejected, HistoryCompacted
from ankka.runtime.records.delegation import Budget, Claims, End, exhausted
from ankka.runtime.records.iterations import IterationCompleted, IterationStarted, iteration_of
from ankka.runtime.records.judgments import JudgmentUsage
from ankka.runtime.records.mcp import SampledCall
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from ankka.runtime.records.registry import Record
from ankka.runtime.records.session import SessionOpened
from ankka.runtime.records.tasks import (
    InstanceRecord,
    InstanceState,
    TaskRecord,
    TaskState,
)
from ankka.runtime.store import task_statements as statements
from ankka.runtime.store import tree_statements as tree
from ankka.runtime.store.database import Transaction
from ankka.runtime.store.journal_store import ConcurrentAppend
from ankka.runtime.store.tasks import Ended as EndedTask
from ankka.runtime.store.tasks import TaskStore

__all__ = [
    "LeaseLost",
    "News",
    "RetryPolicy",
    "Waiting",
    "Workbench",
    "heard_ended",
    "publish_ended",
    "work_task",
]

T = TypeVar("T")
Current = tuple[TaskRecord | None, InstanceRecord | None, tree.TreeRow | None]

NO_TOOL_CALL = "no_tool_call"  # why an answer calling no tool is accounted, not recorded
# Records another process may append to a task's session while its instance works it: a
# compaction's, and a decision's. Anything else means the instance is someone else's now.
_OTHERS = (HistoryCompacted, CompactionRejected, ApprovalDecided)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The pause before attempt ``n + 1`` after ``n`` failures in a row: doubling, capped."""

    first_pause: float = 0.5
    max_pause: float = 30.0

    def pause(self, failures: int) -> float:
        return float(min(self.max_pause, self.first_pause * 2 ** max(0, failures - 1)))


@dataclass(frozen=True, slots=True)
class Workbench:
    """What the task driver works with: the runtime's context, the task store, the live
    notifications, and how it waits between attempts."""

    context: Context
    store: TaskStore
    notifier: Notifier
    sleep: Callable[[float], Awaitable[None]]
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    poke: Callable[[], None] = field(default=lambda: None)
    """Tell the scheduler there is work (a task handed on)."""
    made: Callable[[Sequence[tuple[str, str]], bool], None] = field(default=lambda keys, more: None)
    """Children were made, the instances ``keys`` claimed as ``claimant`` in the transaction
    that made them: start them now (``more``: local children left unclaimed, for the
    scheduler to find)."""
    claimant: str = "local"
    """The lease owner this process's scheduler claims instances as (its own, on SQLite)."""
    places: Callable[[], int] = field(default=lambda: 0)
    """How many more instances this process may start now (``max_instances`` less those it
    runs): at most that many children's instances are claimed as they are made."""
    woken: Callable[[Sequence[tuple[str, str]]], None] = field(default=lambda keys: None)
    """Tell the scheduler instances have something new (parents told of a child's end)."""
    remotes: frozenset[str] = frozenset()
    """The agents other runtimes serve (``ANKKA_PEERS``): a delegation to one is remote."""
    questions: ElicitationDesk | None = None
    """Where an MCP server's questions during a call wait for a person (None: cancelled)."""
    team_tools: Callable[[AutonomousAgent, TaskRecord], tuple[RunnableTool, ...]] = field(
        default=lambda agent, task: ()
    )
    """The tools an agent's task gets as an agent of teams (docs/teams.md: a lead's backlog
    tools, ``team_send_message``): the team host's."""
    team_news: Callable[[AutonomousAgent, TaskRecord], Awaitable[News | None]] = field(
        default=lambda agent, task: _no_news()
    )
    """What a task of a team's agent is to be told at its next iteration (the team host's: a
    lead's backlog news, the team messages sent to its agent): None, or the news and the
    statement that marks it told, in the commit that records it."""
    owner: str | None = None
    """The lease owner this process's scheduler claims instances as on a shared store
    (PostgreSQL; None: no lease is checked, as on SQLite, whose file is one process's).
    Every commit of a task's records holds the instance's lease in its transaction
    (:func:`~ankka.runtime.store.task_statements.held`), and no model call is made for an
    instance whose lease another process has taken."""
    lease_seconds: float = 10.0
    """How long each of those commits renews the lease for."""


@dataclass(frozen=True, slots=True)
class News:
    """What to tell a task with the newest message before its next model call (appended to
    it, never to what was sent before), and how to mark it told in the same commit."""

    text: str
    mark: Callable[[Transaction], None]


async def _no_news() -> News | None:
    return None


@dataclass(frozen=True, slots=True)
class Waiting:
    """The task waits on its children; its instance leaves memory until its ``mark``
    (:func:`ankka.runtime.store.tree_statements.mark`) changes."""

    mark: int


class LeaseLost(StoreError):
    """Another process wrote this task's records: this one no longer owns its instance."""

    kind = "lease_lost"


class _End(Exception):
    def __init__(
        self,
        state: TaskState,
        reason: str | None = None,
        result: dict[str, Any] | None = None,
        *,
        end: End | None = None,
    ) -> None:
        super().__init__(reason or state.value)
        self.state = state
        self.reason = reason
        self.result = result
        self.end = end


class _Gone(Exception):
    """The task was ended by someone else (its parent's end, a deadline) while this instance
    worked it: stop, ending nothing."""


_END_EVENTS = {
    TaskState.COMPLETED: "task_completed",
    TaskState.FAILED: "task_failed",
    TaskState.CANCELLED: "task_cancelled",
}


_STATE_OF_END = {event: state for state, event in _END_EVENTS.items()}


def heard_ended(questions: ElicitationDesk, notice: Notice) -> None:
    """Another process ended a task (its end notice, relayed): the questions its call waits on
    in this process are closed as :func:`told` closes them where the task is ended, with the
    same reason (the notifier's ``ended_elsewhere``)."""
    state = _STATE_OF_END.get(notice.event)
    if state is None or notice.task is None:
        return
    reason = notice.data.get("reason")
    questions.end_task(notice.task, state.value, reason if isinstance(reason, str) else None)


def publish_ended(notifier: Notifier, ended: Sequence[EndedTask]) -> None:
    for item in ended:
        notifier.publish(
            _END_EVENTS[item.state],
            agent=item.agent,
            instance=item.instance,
            task=item.id,
            reason=item.reason,
            **(item.told or {}),
        )


@dataclass
class _Failures:
    """Attempts that decided nothing, in a row, for one task (the engine's :class:`Retry`)."""

    bench: Workbench
    agent: AutonomousAgent
    task: TaskRecord
    count: int = 0
    held: Callable[[], Awaitable[None]] | None = None
    """Checks the instance's lease is this process's still, before the call is made again."""

    async def failed(self, error: ModelError, attempt: int) -> None:
        await self.attempt(str(error), "model_calls_failing")
        if self.held is not None:
            await self.held()

    async def attempt(self, error: str, condition: str) -> None:
        self.count += 1
        bench, agent, task = self.bench, self.agent, self.task
        _tell(bench, "iteration_failed", agent, task, error=error, consecutive=self.count)
        if condition == "model_calls_failing" and bench.notifier.once(task.id, condition):
            _tell(bench, condition, agent, task, error=error)
        if self.count >= agent.max_consecutive_failures:
            raise _End(
                TaskState.FAILED,
                f"{self.count} attempts in a row failed (the agent's max_consecutive_failures); "
                f"the last: {error}",
            )
        await bench.sleep(bench.retry.pause(self.count))


def _last_answer(messages: Sequence[Message]) -> AssistantMessage | None:
    return next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)


def _tell(
    bench: Workbench, event: str, agent: AutonomousAgent, task: TaskRecord, **data: Any
) -> None:
    bench.notifier.publish(event, agent=agent.name, instance=task.instance, task=task.id, **data)


async def work_task(bench: Workbench, agent: AutonomousAgent, task: TaskRecord) -> Waiting | None:
    """Work ``task`` until it ends, its instance stops (suspended, terminated), it is
    cancelled, or it waits on its children (:class:`Waiting`). Raises :class:`LeaseLost` when
    another process took the task's records over."""
    try:
        return await _work(bench, agent, task)
    except _Gone:
        return None
    except _End as end:
        finished = end
        ended = await bench.store.write(
            lambda tx: statements.finish(
                tx,
                task.id,
                finished.state,
                result=finished.result,
                reason=finished.reason,
                end=finished.end,
                now=bench.context.clock.now(),
            )
        )
        told(bench, ended)
        if finished.end is not None and any(item.id == task.id for item in ended):
            bench.context.metrics.work.ended_for(agent.name, finished.end.value)
        return None


def told(bench: Workbench, ended: Sequence[EndedTask]) -> None:
    """Publish what ended, close the questions its calls wait on, and wake the parents told
    of it."""
    publish_ended(bench.notifier, ended)
    if bench.questions is not None:
        for item in ended:
            bench.questions.end_task(item.id, item.state.value, item.reason)
    woken = [item.woken for item in ended if item.woken is not None]
    if woken:
        bench.woken(woken)


async def _work(bench: Workbench, agent: AutonomousAgent, task: TaskRecord) -> Waiting | None:
    accepts = agent.accepted(task.spec.type)
    if accepts is None:
        raise _End(
            TaskState.FAILED,
            f"agent {agent.name!r} does not accept task type {task.spec.type!r} (any more)",
        )
    try:
        provider_for(bench.context.providers, agent.name, agent.model)
    except ConfigurationError as exc:
        raise _End(TaskState.FAILED, str(exc)) from exc
    work = TaskWork(bench, agent, accepts.task_type, task)
    await work.open()
    if not task.started:
        await work.input_guardrails()
        if not await work.start():
            return None
    return await work.run()


class TaskWork:
    """One task worked: the engine's driver hooks, and what they keep between steps."""

    def __init__(
        self, bench: Workbench, agent: AutonomousAgent, task_type: TaskType, task: TaskRecord
    ) -> None:
        self.bench, self.agent, self.task_type, self.task = bench, agent, task_type, task
        self.ctx = bench.context
        self.session = task.session
        self.failures = _Failures(bench, agent, task, held=self._still_held)
        self.ledger = self.ctx.executor.ledger()
        self.folded = SessionState()
        self.listed = Listed()
        self.number = task.iterations_used
        self.dependency_results: dict[str, Any] = {}
        self._rejected: str | None = None
        self._asker: TurnAsker | None = None
        self._compactions = 0
        # Where the task stands, as the iteration's last commit read it back (the next call's
        # check then costs no round trip of its own).
        self._current: Current | None = None
        # The instance as the running commit's lease hold returned it (its read-back's).
        self._holder: InstanceRecord | None = None
        self.handoffs = {h.tool: h.agent for h in agent.handoffs}
        self.delegations = Delegations(
            self.ctx,
            bench.store,
            bench.notifier,
            agent,
            task,
            poke=bench.made,
            claimant=(bench.claimant, bench.lease_seconds),
            places=bench.places,
            published=partial(told, bench),
            remotes=bench.remotes,
        )

    # --- the work --------------------------------------------------------------------------

    async def open(self) -> None:
        """Read the session (from the fold cache: only what is newer than it held) and the
        results of the task's dependencies."""
        self.folded = await self.ctx.sessions.load(self.session)
        for dependency in self.task.spec.depends_on:
            record = await self.bench.store.read(partial(statements.get, task=dependency))
            self.dependency_results[dependency] = record.result if record is not None else None

    async def input_guardrails(self) -> None:
        """The agent's input guardrails see the task's instructions before any model call;
        one that refuses fails the task, one that raises refused nothing (checked again)."""
        try:
            while True:
                try:
                    await self.ctx.executor.guard(
                        self.agent.input_guardrails,
                        self.task.spec.instructions,
                        stage="input",
                        ledger=self.ledger,
                    )
                    return
                except Refused as exc:
                    raise _End(TaskState.FAILED, str(exc)) from exc
                except Exception as exc:
                    error = f"an input guardrail raised {type(exc).__name__}: {exc}"
                    await self.failures.attempt(error, "checks_failing")
        finally:
            await self._record_judged(f"{self.task.id}#input", ())

    async def start(self) -> bool:
        """The task starts and, with no model call between, so does its first iteration; the
        commit reads back where the task stands, for the first call."""
        task, now = self.task, self.ctx.clock.now()

        def write(tx: Transaction) -> Current | None:
            started = statements.update(
                tx,
                task.id,
                now,
                state=TaskState.IN_PROGRESS.value,
                started=1,
                iteration_started=max(1, task.iterations_used + 1),
            )
            return self._read_current(tx) if started is not None else None

        current = await self.bench.store.write(write, serial=False)
        if current is None:
            return False
        self._current = current
        _tell(self.bench, "task_started", self.agent, task)
        return True

    async def run(self) -> Waiting | None:
        await self._complete_recorded()
        if self.agent.servers:  # a recorded answer's calls may be the servers' tools
            self.listed = await self.ctx.mcp_tools(
                self.agent.servers,
                agent=self.agent.name,
                turn=f"{self.task.id}#{self.task.iterations_used}",
                folded=self.folded,
                effect=self.agent,
            )
        state = TurnState(self._plan(), *self._history())
        state.decided = await self._decided(state)
        last = _last_answer(state.produced)
        if last is not None and self.delegations.names:  # else it has no children to read
            state.children = (await self.delegations.children(last)).children
        provider = provider_for(self.ctx.providers, self.agent.name, self.agent.model)
        asker = self._asker = self._asking(provider)
        while True:
            try:
                async with asking(asker):  # leaving it closes questions left unanswered
                    end = await drive(
                        state,
                        executor=self.ctx.executor,
                        provider=provider,
                        driver=self,
                        ledger=self.ledger,
                        retry=self.failures,
                        delegator=self.delegations,
                        session=self.session,
                    )
            except ModelError as exc:  # one a retry cannot help (a refused key, ...)
                raise _End(TaskState.FAILED, str(exc)) from exc
            if isinstance(end, Ended) and end.call.name in self.handoffs:
                await self._hand_off(end)
                return None
            if isinstance(end, Ended):
                raise self._ended(end)
            if isinstance(end, AwaitDecision):
                await self._hold(end.answer, end.waiting, end.trace)
                return None
            if isinstance(end, Repeated):
                raise _End(
                    TaskState.FAILED,
                    f"tool {end.call.name!r} was asked for {end.count} times with the same "
                    f"arguments (digest {end.digest}; the agent's max_identical_calls is "
                    f"{self.agent.max_identical_calls}): stopped before running it again",
                    end=End.REPEATED_CALL,
                )
            if isinstance(end, AwaitChildren):
                waiting = await self._await_children(state, end)
                if waiting is None:
                    continue  # a child ended meanwhile: its result is the next step
                return waiting
            assert isinstance(end, Stopped), f"a task cannot end with {end!r}"
            return None

    async def _await_children(self, state: TurnState, end: AwaitChildren) -> Waiting | None:
        """The calls left wait on children: read them again (with the instance's mark, in one
        read); None when one has ended meanwhile, else wait (leave memory) until the mark
        changes. A task cancelled meanwhile ends here, and its children with it."""
        self._current = None  # the children's ends change the tree's row: the next call reads
        read = await self.delegations.children(end.answer)
        if read.task is None or read.task.final:
            raise _Gone()
        if read.task.cancel_requested:
            raise _End(TaskState.CANCELLED, "cancelled")
        state.children = read.children
        if any(
            (child := read.children.get(call.id)) is not None and child.result is not None
            for call in end.waiting
        ):
            return None
        return Waiting(read.mark)

    def _plan(self) -> TurnPlan:
        agent = self.agent
        complete = CompleteTask.of(
            self.task_type,
            agent,
            self.ctx.executor,
            self.ledger,
            rejected=self._reject,
            failed=self.failures.attempt,
        )
        delegating = tools_of(agent, self.ctx.service.autonomous_agents, self.task.spec.type)
        leading = self.bench.team_tools(agent, self.task)
        tools = (*agent.tools, *self.listed.tools, *delegating, *leading)
        return TurnPlan(
            agent=agent.name,
            instructions=prompt.instructions(agent, self.task_type),
            tools=(*tools, complete, FailTask.of()),
            reasoning_effort=agent.reasoning_effort,
            max_output_tokens=self.task_type.max_output_tokens,
            tool_choice="required",
            ending=frozenset({COMPLETE_TASK, FAIL_TASK, *self.handoffs}),
            text_answers=False,
            delegations=self.delegations.names,
            max_repeats=agent.max_identical_calls,
        )

    def _history(self) -> tuple[tuple[UserMessage], list[Any]]:
        """The context (the task message, with the summary once compacted) and the session's
        messages after the summary, as the engine's state holds them."""
        view = self.folded.view
        summary = view.summary.summary if view.summary is not None else None
        first = UserMessage(
            prompt.task_message(self.task, self.dependency_results, summary),
            self.agent.name,
            f"{self.task.id}#0",
        )
        self._compactions = view.compactions
        return (first,), list(view.verbatim)

    async def _decided(self, state: TurnState) -> Decided | None:
        """The verdicts on the last answer's gated calls, once every request is decided (the
        task goes back to work: ``in-progress``)."""
        answer = next(
            (m for m in reversed(state.produced) if isinstance(m, AssistantMessage)), None
        )
        held = self.folded.approvals.of_turn(answer.turn) if answer is not None else None
        if answer is None or held is None or not held.all_decided:
            return None
        if self.task.state == TaskState.AWAITING_APPROVAL:
            await self._set_state(TaskState.IN_PROGRESS)
        verdicts = {
            call: Verdict(approval, decided.decision, decided.reason)
            for call, (approval, decided) in held.verdicts.items()
        }
        return Decided(answer, verdicts, held.started_calls)

    async def _hand_off(self, end: Ended) -> None:
        """The model handed the task on (its call's result recorded): give it to the other
        agent, in one transaction; this instance moves on."""
        to, note = self.handoffs[end.call.name], note_of(end.call.arguments)
        moved = await self.bench.store.write(
            partial(statements.hand_off, task=self.task.id, to=to, note=note,
                    now=self.ctx.clock.now())
        )  # fmt: skip
        if moved is None:
            return  # handed on before a restart, or ended meanwhile
        before, after = moved
        _tell(self.bench, "task_handed_off", self.agent, before, to=to, note=note)
        self.bench.notifier.publish(
            "task_assigned", agent=to, instance=after.instance, task=after.id,
            handed_off_by=self.agent.name,
        )  # fmt: skip
        self.bench.poke()

    def _ended(self, end: Ended) -> _End:
        """The end a ``complete_task`` accepted or a ``fail_task`` decided (now, or as
        recorded before a restart)."""
        if end.call.name == COMPLETE_TASK:
            decoded = decode_result(self.task_type, end.call.arguments)
            assert isinstance(decoded, Decoded), "an accepted result decoded when it was judged"
            return _End(TaskState.COMPLETED, result=result_json(decoded.value))
        reason = decode_fail(end.call.arguments)
        assert isinstance(reason, str)
        return _End(TaskState.FAILED, reason)

    # --- the engine's hooks ----------------------------------------------------------------

    async def before_call(self, state: TurnState) -> str | None:
        current, holder, row = await self._where_it_stands(state)
        if current is None or current.final or current.instance != self.task.instance:
            return None  # ended elsewhere, or its instance was terminated
        # Between iterations: a cancelled task stops here, after its iteration's tools ran.
        if current.cancel_requested:
            raise _End(TaskState.CANCELLED, "cancelled")
        if holder is None or holder.state != InstanceState.ACTIVE:
            return None  # suspended: stop before the next model call
        if row is not None and row.ancestors:
            self.delegations.ancestors = row.ancestors
            self.bench.notifier.nest(current.id, row.ancestors)
        budget = Budget(current.budget, row.token_budget if row is not None else None)
        claims = row.claims if row is not None else Claims(current.iterations_used)
        spent = exhausted(budget, claims)
        if spent is not None:
            raise _End(
                TaskState.FAILED,
                f"{spent.reason} without ending through {COMPLETE_TASK} or {FAIL_TASK}",
                end=End.BUDGET_EXHAUSTED,
            )
        self.task = current
        if current.state != TaskState.IN_PROGRESS:
            await self._set_state(TaskState.IN_PROGRESS)  # back to work after a rejection
        self.number = current.iterations_used + 1
        turn = f"{current.id}#{self.number}"
        servers = self.agent.servers
        self.listed = await self.ctx.mcp_tools(
            servers, agent=self.agent.name, turn=turn, folded=self.folded, effect=self.agent
        )
        if self.listed.tools or servers:
            state.plan = self._plan()
        # Last before the call (the tools' listing above may take a while): the lease is held.
        await self._still_held(holder)
        _tell(self.bench, "iteration_started", self.agent, current, iteration=self.number,
              budget=current.budget)  # fmt: skip
        return turn

    def _read_current(self, tx: Transaction, holder: InstanceRecord | None = None) -> Current:
        """The task's, its instance's (``holder``: as a commit's lease hold returned it) and
        its tree's rows."""
        task = self.task
        instance = task.instance or ""
        if holder is None:
            holder = statements.get_instance(tx, self.agent.name, instance)
        return (statements.get(tx, task.id), holder, tree.row(tx, task.id))

    async def _still_held(self, holder: InstanceRecord | None = None) -> None:
        """Before a model call: the instance's lease is this process's still (as ``holder``
        was read, or read now), or :class:`LeaseLost`. Another process that took it may have
        recorded an answer this one's history lacks: this one must not ask again. A lease
        with less than half its length left (run out, or the scheduler's renewal late) and no one
        having taken it is renewed first (one write, only then)."""
        owner = self.bench.owner
        if owner is None:
            return
        agent, instance = self.agent.name, self.task.instance or ""
        if holder is None:
            holder = await self.bench.store.read(
                lambda tx: statements.get_instance(tx, agent, instance)
            )
        now = self.ctx.clock.now().timestamp()
        if holder is not None and holder.lease_owner == owner:
            # Half the lease left at least: the call is made well before anyone may take the
            # instance (a renewal running late, its process starved, is made here).
            left = (holder.lease_until or 0.0) - now
            if left >= self.bench.lease_seconds / 2:
                return
            until = now + self.bench.lease_seconds
            if await self.bench.store.write(
                lambda tx: statements.held(tx, agent, instance, owner, until), serial=False
            ):
                return
        raise LeaseLost(
            f"instance {agent}/{instance} is another process's now (its lease was taken): "
            "this one makes no model call for it"
        )

    async def answered(self, state: TurnState, answer: AssistantMessage) -> bool:
        call = answer.call
        assert call is not None
        self.ctx.metrics.calls_made(self.agent.name, (call,))
        if not answer.tool_calls:
            # A task's requests require a tool call: this one is accounted, not recorded as
            # an answer (a synthetic message would be needed to go on from it), and tried again.
            unwritten = UnwrittenCalls(answer.turn, self.agent.name, NO_TOOL_CALL, (call,))
            spent = partial(
                statements.add_usage, task=self.task.id, usage=call.usage, now=self.ctx.clock.now()
            )
            await self._append((unwritten,), then=spent)  # with its usage: one transaction
            await self.failures.attempt(
                f"the model answered without calling a tool (a task ends only through "
                f"{COMPLETE_TASK} or {FAIL_TASK})",
                "model_calls_failing",
            )
            return False
        self.failures.count = 0
        number, task = self.number, self.task
        if self._asker is not None:  # what its servers ask next belongs to this iteration
            self._asker.turn = answer.turn
        records: list[Record] = [
            *self.listed.records,
            IterationStarted(number),
            answer,
            IterationCompleted(number, call.usage),
        ]
        # The answer, its marks and the completion on the task's row: one transaction.
        recorded = await self._append(
            records,
            then=partial(
                statements.complete_iteration, task=task.id, number=number, usage=call.usage,
                now=self.ctx.clock.now(),
            ),
        )  # fmt: skip
        if recorded is None or recorded.final:
            raise _Gone()  # ended meanwhile (its parent ended, a deadline): run none of it
        self.task = replace(task, iterations_used=max(task.iterations_used, number))
        _tell(self.bench, "iteration_completed", self.agent, task, iteration=number,
              budget=task.budget, usage=call.usage.as_dict())  # fmt: skip
        if task.budget - number <= prompt.NEAR_END and self.bench.notifier.once(
            task.id, "budget_approaching"
        ):
            _tell(self.bench, "budget_approaching", self.agent, task, used=number,
                  budget=task.budget)  # fmt: skip
        return True

    async def starting(self, state: TurnState, step: RunTool) -> None:
        """The start is recorded before the run: it spends the approval."""
        assert step.approved is not None
        held = self.folded.approvals.of_turn(step.answer.turn)
        request = held.request(step.approved.approval) if held is not None else None
        assert request is not None, "an approved call's request is recorded"
        start = ApprovedCallStarted(request.id, step.answer.turn, step.call.id, request.digest)
        await self._append((start,))

    async def ran(self, state: TurnState, result: ToolResult) -> ToolResult:
        answer = _last_answer(state.produced)
        assert answer is not None, "a result answers a call of an answer"
        answered = {m.call_id for m in state.produced if isinstance(m, ToolResult)}
        last = all(c.id in answered or c.id == result.call_id for c in answer.tool_calls)
        ends = result.name in (COMPLETE_TASK, FAIL_TASK, *self.handoffs) and not result.is_error
        number = iteration_of(answer.turn)
        news: News | None = None
        if last and not ends and number is not None:
            # The newest message carries what the task is to be told (a lead: its items'
            # ends; a team's agent: the messages sent to it; marked told in the same commit,
            # so told once) and where the next iteration stands, as it is recorded (for a
            # task that delegates, counting what its children used or hold).
            news = await self.bench.team_news(self.agent, self.task)
            if news is not None:
                result = replace(result, content=f"{result.content}\n\n{news.text}")
            following = await self._next_iteration(number)
            if following <= self.task.budget:  # else no call follows: the budget is spent
                content = prompt.with_note(result.content, following, self.task.budget)
                result = replace(result, content=content)
        # The iteration's last commit reads where the task stands for the next call.
        await self._record_judged(
            answer.turn,
            (result,),
            read_back=last and not ends,
            mark=news.mark if news is not None else None,
        )
        if self._rejected is not None:
            reason, self._rejected = self._rejected, None
            await self._set_state(TaskState.RESULT_REJECTED, reason=reason)
            self._current = None  # what the commit read back is older than this
            _tell(self.bench, "task_result_rejected", self.agent, self.task, reason=reason)
        return result

    async def _next_iteration(self, number: int) -> int:
        """Which of its budget's iterations the next model call is: the one after ``number``,
        or, for a task that delegates, the one after everything its tree used or holds."""
        if not self.delegations.names:
            return number + 1
        task = self.task.id
        row = await self.bench.store.read(lambda tx: tree.row(tx, task))
        return max(number, row.claims.iterations if row is not None else 0) + 1

    def _asking(self, provider: ModelProvider) -> TurnAsker | None:
        """What the task's MCP servers ask during its calls: a question waits for a person
        (the task awaits approval meanwhile), sampling is the task's model's when allowed."""
        desk = self.bench.questions
        if desk is None:
            return None

        def tell(event: str, data: dict[str, Any]) -> None:
            _tell(self.bench, event, self.agent, self.task, **data)

        async def waiting(now: bool) -> None:
            await self._set_state(TaskState.AWAITING_APPROVAL if now else TaskState.IN_PROGRESS)

        return TurnAsker(
            desk, self.session, self.agent.name, f"{self.task.id}#{self.number}",
            self.folded.position, self.folded.opened, provider, self.ledger,
            sampling_of(self.agent.servers), record=self._record_asked, notify=tell,
            waiting=waiting, allowance=self._tokens_left,
            max_output_tokens=self.task_type.max_output_tokens,
        )  # fmt: skip

    async def _tokens_left(self) -> str | None:
        """Why a sampling call may not be made: the task's token budget is spent (its own
        spend and its children's claims, as the store holds them now)."""
        task = self.task.id
        row = await self.bench.store.read(lambda tx: tree.row(tx, task))
        if row is None or row.token_budget is None or row.claims.tokens < row.token_budget:
            return None
        return f"the task's token budget ({row.token_budget}) is spent"

    async def _record_asked(self, records: Sequence[Record]) -> None:
        """A question's answer, or a sampling call with its tokens on the task's row (one
        transaction): the task's usage and budget count what its servers had its model do."""
        usage = Usage()
        for record in records:
            if isinstance(record, SampledCall):
                usage = usage + record.call.usage
        if usage == Usage():
            await self._append(records)
            return
        now = self.ctx.clock.now()
        await self._append(
            records, then=partial(statements.add_usage, task=self.task.id, usage=usage, now=now)
        )

    # --- waiting for a decision --------------------------------------------------------------

    async def _hold(
        self, answer: AssistantMessage, waiting: Sequence[ToolCall], trace: Mapping[str, str]
    ) -> None:
        """Record the requests of the calls that wait (index rows first, then one
        ``turn_suspended`` naming the answer's turn, with ``trace``, the iteration's context),
        once; the task awaits approval and its instance makes no model call meanwhile."""
        held = self.folded.approvals.of_turn(answer.turn)
        requests = held.undecided if held is not None else ()
        if held is None:
            index = need_index(self.ctx.approvals, self.agent.name, waiting)
            now = self.ctx.clock.now()
            tools = {t.name: t for t in self.agent.tools}

            def timeout_of(call: ToolCall) -> float | None:
                found = tools.get(call.name)
                rule = found.approval if found is not None else None
                return rule.timeout if rule is not None else None

            position = self.folded.position + 1
            requests = tuple(requests_for(waiting, timeout_of, position=position, now=now))
            rows = [(r.id, r.tool, r.expires_at) for r in requests]
            await index.schedule(self.session, self.agent.name, rows, now)
            suspended = TurnSuspended(answer.turn, self.agent.name, "", (), requests, trace)
            await self._append((suspended,))
            self.ctx.metrics.work.requested(self.agent.name, [r.tool for r in requests])
        if self.task.state != TaskState.AWAITING_APPROVAL:
            await self._set_state(TaskState.AWAITING_APPROVAL)
        if held is None:
            for request in requests:
                _tell(self.bench, "approval_requested", self.agent, self.task, **request.shown())

    # --- commits ---------------------------------------------------------------------------

    async def _append(
        self, records: Sequence[Record], *, then: Callable[[Transaction], T] | None = None
    ) -> T | None:
        """Append after the position the instance holds, with ``then`` (a statement of the
        task's rows) in the same transaction when given: what it returned. Records that
        another process may write meanwhile (a compaction, a decision) are folded in and the
        append made again, anything else means the instance is someone else's
        (:class:`LeaseLost`)."""
        if self.folded.position == 0:
            # The session is its task's creator's, under its agent's policy, as the task is.
            records = (SessionOpened(self.task.created_by, self.task.spec.agent), *records)
        journal, folded = self.ctx.journal, self.folded
        found: T | None = None
        fenced = self._fenced(then)
        while True:
            try:
                if fenced is None:
                    await self.ctx.record(self.session, folded, records)
                else:
                    found = await self.ctx.commit(self.session, folded, records, fenced)
                break
            except ConcurrentAppend as exc:
                newer = await journal.read(self.session, after=folded.position)
                if not newer or not all(isinstance(e.record, _OTHERS) for e in newer):
                    raise LeaseLost(
                        f"session {self.session!r} was written by another process; it owns "
                        "the instance now"
                    ) from exc
                for entry in newer:
                    folded.add(entry.seq, entry.record)
        settings = self.ctx.compaction_of(self.agent.name, self.agent.compaction)
        self.ctx.committed(self.session, settings, self.agent.model)
        return found

    def _fenced(
        self, then: Callable[[Transaction], T] | None
    ) -> Callable[[Transaction], T | None] | None:
        """``then`` after holding the instance's lease in the same transaction (renewed), or
        :class:`LeaseLost` there, undoing the append: a process that lost the lease records
        nothing more (another process that took the instance read its session already, and
        would ask again what this one recorded after)."""
        owner = self.bench.owner
        if owner is None:
            return then
        agent, instance = self.agent.name, self.task.instance or ""
        until = self.ctx.clock.now().timestamp() + self.bench.lease_seconds

        def fenced(tx: Transaction) -> T | None:
            holder = statements.held(tx, agent, instance, owner, until)
            if holder is None:
                raise LeaseLost(
                    f"instance {agent}/{instance} is another process's now (its lease was "
                    "taken): this one records nothing more of it"
                )
            self._holder = holder
            return then(tx) if then is not None else None

        return fenced

    async def _where_it_stands(self, state: TurnState) -> Current:
        """The task's and its instance's rows, as the last commit read them back or else
        read now, with what this process's compaction consumer appended since (the same read);
        the next request is sent from the session as it then stands. The session is never
        read whole: the fold is the instance's own, kept as it commits."""
        found, self._current = self._current, None
        folded = self.folded
        if found is None or self.ctx.compactor.wrote_since_asked(self.session):
            since = await self.ctx.journal.read_with(
                self.session, after=folded.position, then=self._read_current
            )
            for entry in since.entries:
                folded.add(entry.seq, entry.record)
            self.ctx.sessions.remember(self.session, folded)
            found = since.value
        if folded.view.compactions != self._compactions:  # here, or folded in by a commit
            state.context, state.produced = self._history()
        return found

    async def _record_judged(
        self,
        turn: str,
        records: Sequence[Record],
        *,
        read_back: bool = False,
        mark: Callable[[Transaction], None] | None = None,
    ) -> None:
        """``records`` with what judged guardrails spent since (a ``judgment_usage`` record,
        summed on the task's usage in the same transaction), in one commit; ``read_back``:
        the commit also reads where the task stands, for the next call; ``mark``: a
        statement made in the same commit (what the records told the task, marked told)."""
        judging = self.ledger.judging
        usage = judging.usage if judging.spent else None
        judging.spent.clear()
        if usage is not None:
            records = (JudgmentUsage(usage, self.agent.name, turn), *records)
        if not records:
            return
        task, now = self.task, self.ctx.clock.now()

        def then(tx: Transaction) -> Current | None:
            if usage is not None:
                statements.add_usage(tx, task.id, usage, now)
            if mark is not None:
                mark(tx)
            return self._read_current(tx, self._holder) if read_back else None

        found = await self._append(records, then=then)
        if read_back:
            self._current = found

    async def _reject(self, reason: str) -> None:
        self._rejected = reason

    async def _set_state(self, state: TaskState, *, reason: str | None = None) -> None:
        task, now = self.task, self.ctx.clock.now()
        changes: dict[str, Any] = {"state": state.value}
        if reason is not None:
            changes["reason"] = reason
        await self.bench.store.write(
            lambda tx: statements.update(tx, task.id, now, **changes),
            serial=state == TaskState.AWAITING_APPROVAL,
        )
        self.task = replace(task, state=state)

    async def _complete_recorded(self) -> None:
        """Record on the task every iteration the journal holds as completed and the task
        record does not (the process stopped between the two commits), with its usage: once
        each."""
        task, now = self.task, self.ctx.clock.now()
        for number, usage in sorted(self.folded.iterations.items()):
            if number > task.iterations_used:
                self._current = None  # the task's row changes: the next call reads it
                await self.bench.store.write(
                    partial(
                        statements.complete_iteration, task=task.id, number=number, usage=usage,
                        now=now,
                    ),
                    serial=False,
                )  # fmt: skip
                self.task = replace(self.task, iterations_used=number)
