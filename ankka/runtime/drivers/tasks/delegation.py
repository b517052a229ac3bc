"""Delegation in the task driver: the tools the model is given, the children of its calls.

The task driver (:mod:`.iteration`) hands the engine a :class:`Delegations`: the planner
decides (from the journal and the children's outcomes) when a call's child is to be made
(:class:`~ankka.runtime.engine.steps.Delegate`, carried out by :meth:`Delegations.delegate`)
and when a child's end is its call's result; this module reads and writes the store for it:

- :meth:`Delegations.delegate`: one transaction making an answer's children (each id derived
  from the task and the call, each grant reserved in the calls' order), or finding them again
  on a replay, or refusing; the local children made are started at once (``poke``: the task
  host's, which starts their instances rather than waiting for its scheduler);
- :meth:`Delegations.children`: the children of the last answer's delegation calls with their
  outcomes, and the instance's mark (read in the same transaction, so an outcome that lands
  after it raises the mark and wakes the instance).

A delegation tool is never run by the executor (the planner answers its call with the child's
end); it is here to be offered to the model. A handoff tool is run: it checks its input, and
the driver moves the task when it answered (:func:`handoff_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ankka.runtime.declare.autonomous import AutonomousAgent
from ankka.runtime.declare.delegation import Delegate, DelegateInput, HandoffInput
from ankka.runtime.declare.tools import RunnableTool, ToolOutcome, ToolSpec
from ankka.runtime.drivers.context import Context
from ankka.runtime.drivers.tasks.ending import Builtin
from ankka.runtime.drivers.tasks.notify import Notifier
from ankka.runtime.engine.steps import Child, TurnState
from ankka.runtime.engine.steps import Delegate as DelegateStep
from ankka.runtime.records.delegation import ChildOutcome, child_id
from ankka.runtime.records.iterations import iteration_of
from ankka.runtime.records.messages import AssistantMessage, ToolCall, ToolResult
from ankka.runtime.records.tasks import TaskRecord, own_instance_id
from ankka.runtime.store import (
    delegate_statements,
    task_statements,
    trace_statements,
    tree_statements,
)
from ankka.runtime.store.delegate_statements import Made, Wanted
from ankka.runtime.store.tasks import Ended, TaskStore, Transaction

__all__ = ["HANDED_ON", "Delegations", "HandoffTool", "Read", "note_of", "tools_of"]

HANDED_ON = "handed on: the task is the other agent's now"
_NOT_RUN = "a delegation is answered by its child's end, not run"


@dataclass(frozen=True, slots=True)
class DelegateTool(Builtin):
    """A delegation tool as the model is offered it."""

    spec: ToolSpec

    async def run(self, raw_arguments: str) -> ToolOutcome:
        return ToolOutcome(_NOT_RUN, is_error=True)


@dataclass(frozen=True, slots=True)
class HandoffTool(Builtin):
    """``handoff__<agent>``: its input is a note; it answers (an error when ``refused``
    says why the task cannot go to that agent), and the driver moves the task."""

    spec: ToolSpec
    agent: str
    refused: str | None = None

    async def run(self, raw_arguments: str) -> ToolOutcome:
        if self.refused is not None:
            return ToolOutcome(self.refused, is_error=True)
        try:
            HandoffInput.model_validate_json(raw_arguments or "{}")
        except ValidationError as exc:
            return ToolOutcome(
                f"the handoff's input did not decode: {exc.errors()[0]['msg']}", True
            )
        return ToolOutcome(HANDED_ON, is_error=False)


def note_of(arguments: str) -> str:
    """A handoff call's note (its input decoded when it was run)."""
    return HandoffInput.model_validate_json(arguments or "{}").note


def tools_of(
    agent: AutonomousAgent, service_agents: Mapping[str, AutonomousAgent], task_type: str
) -> tuple[RunnableTool, ...]:
    """The delegation and handoff tools ``agent`` offers the model on a task of
    ``task_type``."""
    made: list[RunnableTool] = []
    for item in agent.delegates:
        known = service_agents.get(item.agent)
        made.append(DelegateTool(item.spec(known.description if known is not None else "")))
    for handoff in agent.handoffs:
        target = service_agents.get(handoff.agent)
        refused = None
        if target is None:
            refused = (
                f"agent {handoff.agent!r} is not served by this runtime: nothing was handed on"
            )
        elif target.accepted(task_type) is None:
            refused = (
                f"agent {handoff.agent!r} does not accept task type {task_type!r}: nothing was "
                "handed on"
            )
        made.append(HandoffTool(handoff.spec(), handoff.agent, refused))
    return tuple(made)


@dataclass(frozen=True, slots=True)
class Read:
    """What a parent's driver reads of its children: by call id, and the instance's mark."""

    children: dict[str, Child]
    mark: int
    task: TaskRecord | None


def _result(answer: AssistantMessage, call: ToolCall, outcome: ChildOutcome) -> ToolResult:
    return ToolResult(
        call.id, call.name, outcome.content(), outcome.is_error, answer.agent, answer.turn
    )


def _index(answer: AssistantMessage, call: ToolCall) -> int:
    return next(i for i, asked in enumerate(answer.tool_calls) if asked is call)


class Delegations:
    """The children of one task's delegation calls (the engine's :class:`Delegator`)."""

    def __init__(
        self,
        context: Context,
        store: TaskStore,
        notifier: Notifier,
        agent: AutonomousAgent,
        task: TaskRecord,
        *,
        poke: Callable[[Sequence[tuple[str, str]], bool], None],
        claimant: tuple[str, float] = ("local", 10.0),
        places: Callable[[], int] = lambda: 0,
        published: Callable[[list[Ended]], None],
        remotes: frozenset[str] = frozenset(),
    ) -> None:
        self.context, self.store, self.notifier = context, store, notifier
        self.agent, self.task = agent, task
        self.poke, self.published, self.remotes = poke, published, remotes
        self.claimant = claimant  # the lease owner and length a child's instance is claimed as
        self.places = places  # how many children's instances this process may start now
        self.names = frozenset(d.tool for d in agent.delegates)
        self.ancestors: tuple[str, ...] = ()  # the task's own, as its tree row says

    def _delegations(self, answer: AssistantMessage | None) -> dict[str, str]:
        """The last answer's delegation calls: call id → its child's id."""
        if answer is None or not self.names:
            return {}
        number = iteration_of(answer.turn)
        if number is None:
            return {}
        return {
            call.id: child_id(self.task.id, number, index)
            for index, call in enumerate(answer.tool_calls)
            if call.name in self.names
        }

    async def children(self, answer: AssistantMessage | None) -> Read:
        """The children of ``answer``'s delegation calls, their outcomes, the task's record
        and its instance's mark, in one read."""
        wanted = self._delegations(answer)
        task, instance = self.task, self.task.instance or ""

        def read(tx: Any) -> tuple[dict[str, ChildOutcome | None], int, TaskRecord | None]:
            outcomes = delegate_statements.calls(tx, list(wanted.values()))
            return (
                outcomes,
                tree_statements.mark(tx, task.spec.agent, instance),
                (task_statements.get(tx, task.id)),
            )

        outcomes, mark, record = await self.store.read(read)
        found: dict[str, Child] = {}
        calls = {c.id: c for c in (answer.tool_calls if answer is not None else ())}
        for call_id, child in wanted.items():
            if child not in outcomes:
                continue
            outcome = outcomes[child]
            result = _result(answer, calls[call_id], outcome) if answer and outcome else None
            found[call_id] = Child(child, result)
        return Read(found, mark, record)

    async def delegate(
        self, state: TurnState, step: DelegateStep, traces: Mapping[str, Mapping[str, str]]
    ) -> dict[str, Child]:
        """Make (or find) the children of ``step.calls``, in one transaction, each call's in
        order as one after another would be; a call the store refuses, or whose input does
        not decode, has its result at once (no child). The local children made are started
        at once (:attr:`poke`)."""
        answer = step.answer
        number = iteration_of(answer.turn)
        assert number is not None, "a task's answer names its iteration"
        found: dict[str, Child] = {}
        asked: list[tuple[ToolCall, Delegate, Wanted]] = []
        for call in step.calls:
            wanted = self._wanted_of(answer, call, number)
            if isinstance(wanted, Child):
                found[call.id] = wanted
            else:
                asked.append((call, *wanted))
        if not asked:
            return found
        now = self.context.clock.now()
        owner, lease = self.claimant
        until, places = now.timestamp() + lease, self.places()

        claimed: list[tuple[str, str]] = []

        def write(tx: Transaction) -> list[Made]:
            made: list[Made] = []
            claimed.clear()  # a write may be run again (a retried transaction)
            for call, declared, wanted in asked:
                one = delegate_statements.delegate(tx, wanted, now=now)
                if one.created and one.task is not None:
                    # With tracing on, the child is recorded in the trace of its call's
                    # execute_tool span: one trace per task tree.
                    carrier = traces.get(call.id)
                    if carrier:
                        trace_statements.record(tx, one.task, carrier)
                    key = (declared.agent, own_instance_id(one.task))
                    # A local child's instance is this process's, to start at once (while it
                    # has places: the rest are its scheduler's, or another process's, to take).
                    if (
                        wanted.remote is None
                        and len(claimed) < places
                        and task_statements.claim(tx, *key, owner, until, now.timestamp())
                    ):
                        claimed.append(key)
                made.append(one)
            return made

        written: list[Made] = await self.store.write(write)
        for (call, declared, _), made in zip(asked, written, strict=True):
            if made.created or made.task is None:  # counted once: a child found again is not
                outcome = "child_made" if made.created else "refused"
                self.context.metrics.work.delegated(self.agent.name, declared.agent, outcome)
            if made.created:
                self._told_made(made, declared)
            result = _result(answer, call, made.outcome) if made.outcome is not None else None
            found[call.id] = Child(made.task, result)
        made_here = zip(asked, written, strict=True)
        local = sum(made.created and wanted.remote is None for (_, _, wanted), made in made_here)
        if any(made.created for made in written):
            self.poke(claimed, len(claimed) < local)
        return found

    def _wanted_of(
        self, answer: AssistantMessage, call: ToolCall, number: int
    ) -> Child | tuple[Delegate, Wanted]:
        """What ``call`` asks the store for, or its child already answered (its input did
        not decode, or it was refused here)."""
        declared = self.agent.delegate(call.name)
        assert declared is not None, "the planner delegates only the agent's delegation tools"
        try:
            given = DelegateInput.model_validate_json(call.arguments or "{}")
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            message = f"the arguments for tool {call.name!r} did not decode: {problems}"
            return Child(
                None, ToolResult(call.id, call.name, message, True, answer.agent, answer.turn)
            )
        wanted = self._wanted(declared, call, number, _index(answer, call), given)
        if isinstance(wanted, ChildOutcome):
            self.context.metrics.work.delegated(self.agent.name, declared.agent, "refused")
            return Child(None, _result(answer, call, wanted))
        return declared, wanted

    def _wanted(
        self, declared: Delegate, call: ToolCall, number: int, index: int, given: DelegateInput
    ) -> Wanted | ChildOutcome:
        target = self.context.service.autonomous_agents.get(declared.agent)
        remote = declared.agent if declared.agent in self.remotes else None
        if remote is None and target is None:
            return ChildOutcome(
                "refused", None, declared.agent, None,
                f"agent {declared.agent!r} is served neither by this runtime nor by a peer "
                "it knows (ANKKA_PEERS): no child was made",
                "agent_unknown",
            )  # fmt: skip
        accepts = target.accepted(declared.task_type.name) if target is not None else None
        if remote is None and accepts is None:
            return ChildOutcome(
                "refused", None, declared.agent, None,
                f"agent {declared.agent!r} does not accept task type {declared.task_type.name!r}",
                "type_not_accepted",
            )  # fmt: skip
        iterations = declared.budget or (accepts.budget if accepts is not None else 10_000)
        tokens = declared.tokens or (accepts.tokens if accepts is not None else None)
        limits = self.agent.limits
        return Wanted(
            parent=self.task.id,
            call=call.id,
            iteration=number,
            index=index,
            agent=declared.agent,
            type=declared.task_type.name,
            instructions=given.instructions,
            attachments=tuple(given.attachments),
            iterations=iterations,
            tokens=tokens,
            deadline=declared.deadline,
            max_depth=limits.max_depth,
            max_children=limits.max_children,
            remote=remote,
        )

    def _told_made(self, made: Made, declared: Delegate) -> None:
        task = self.task
        self.notifier.publish(
            "task_delegated", agent=self.agent.name, instance=task.instance, task=task.id,
            child=made.task, child_agent=declared.agent,
        )  # fmt: skip
        if made.task is not None:
            self.notifier.nest(made.task, (*self.ancestors, task.id))
            self.notifier.publish(
                "task_assigned", agent=declared.agent, instance=own_instance_id(made.task),
                task=made.task, parent=task.id,
            )  # fmt: skip
        self.published(list(made.ended))
