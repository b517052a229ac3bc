"""The step planner: a turn's state in, its next step out. Pure.

Every kind of work an agent does is the same loop (:mod:`.loop`): read where the turn stands,
decide the next step, carry it out (:mod:`.executor`), record it (the driver's choice of
when). This module is the deciding. Given the turn's :class:`TurnPlan` (what it may use and
how it ends), the context it was given, the messages it produced so far and the verdicts on
the calls that waited for a person, :func:`next_step` says one of:

- :class:`CallModel` — ask the model, with the request it is sent;
- :class:`RunTool` — run the next call of the last answer (an approved call's start is
  recorded first);
- :class:`Settle` — answer a call without running it (a person refused it, it expired, or
  its approved run was cut off);
- :class:`AwaitDecision` — stop: calls of the last answer wait for a person;
- :class:`Finish` — the last answer called no tool: it is the turn's answer;
- :class:`Ended` — a tool that ends the work (a task's ``complete_task`` or ``fail_task``)
  answered without error;
- :class:`OutOfRounds` — the model still asks for tools past the turn's limit;
- :class:`Delegate` — a call that delegates (docs/delegation.md) has no child yet: make it,
  and with it the children of the calls after it that would be the next steps (one
  transaction for an answer's children);
- :class:`AwaitChildren` — stop: the calls left of the last answer wait on their children
  (a child's end is settled as its call's result, by :class:`Settle`, once it is known);
- :class:`Repeated` — the next call would be the ``max_repeats``-th with the same tool and
  arguments in this work: stop before running it.

A resumed turn (after an approval, after a restart) is planned from what was recorded, by the
same function, so resuming is not a second copy of the lifecycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ankka.runtime.declare.tools import RunnableTool, ToolSpec
from ankka.runtime.engine.repeats import call_digest, twins
from ankka.runtime.providers.base import ModelRequest, OutputSchema, ToolChoice
from ankka.runtime.records.messages import AssistantMessage, Message, ToolCall, ToolResult

__all__ = [
    "CUT_OFF_RUN",
    "EXPIRED",
    "REFUSED",
    "AwaitChildren",
    "AwaitDecision",
    "CallModel",
    "Child",
    "Decided",
    "Delegate",
    "Ended",
    "Finish",
    "OutOfRounds",
    "Repeated",
    "RunTool",
    "Settle",
    "Step",
    "ToolChoice",
    "TurnPlan",
    "TurnState",
    "Verdict",
    "decided_result",
    "next_step",
]

REFUSED = "a person refused this call, so it was not run"
EXPIRED = "no one decided in time whether this call may run, so it was not run"
CUT_OFF_RUN = (
    "this approved call's run was cut off (the runtime stopped after its start was recorded); "
    "it is not run again"
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A decided call: ``approved``, ``refused`` or ``expired``, and why."""

    approval: str
    decision: str
    reason: str


@dataclass(frozen=True, slots=True)
class Decided:
    """The verdicts on the gated calls of one answer, and the approved calls whose start was
    already recorded (a run cut off: never run again)."""

    answer: AssistantMessage
    verdicts: Mapping[str, Verdict]
    started: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnPlan:
    """What a turn may use and how it ends; built by its driver with no I/O.

    ``max_rounds``: the most answers asking for tools (None: the driver bounds the work, as a
    task's budget does). ``ending``: tools whose answer without error ends the work.
    ``text_answers``: whether a reply calling no tool is the turn's answer (a request) or not
    (a task, which ends only through its ending tools). ``delegations``: tools whose call makes
    a child task and is answered by the child's end. ``max_repeats``: the work stops before
    the call that would be the N-th with the same tool and arguments (None: no limit).
    """

    agent: str
    instructions: str
    tools: tuple[RunnableTool, ...] = ()
    output: OutputSchema | None = None
    reasoning_effort: str | None = None
    max_output_tokens: int | None = None
    tool_choice: ToolChoice = "auto"
    max_rounds: int | None = None
    ending: frozenset[str] = frozenset()
    text_answers: bool = True
    delegations: frozenset[str] = frozenset()
    max_repeats: int | None = None
    by_name: Mapping[str, RunnableTool] = field(init=False, repr=False, compare=False)
    # Built once per plan, not per request or per call: what every model call is offered.
    specs: tuple[ToolSpec, ...] = field(init=False, repr=False, compare=False)
    offered: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {t.name: t for t in self.tools}
        object.__setattr__(self, "by_name", by_name)
        object.__setattr__(self, "specs", tuple(t.spec for t in self.tools))
        object.__setattr__(self, "offered", tuple(by_name))

    def request(self, messages: Sequence[Message]) -> ModelRequest:
        return ModelRequest(
            self.instructions,
            messages,
            self.specs,
            self.output,
            self.reasoning_effort,
            max_output_tokens=self.max_output_tokens,
            tool_choice=self.tool_choice,
        )

    def waits(self, call: ToolCall) -> bool:
        """Whether ``call`` waits for a person's decision (its tool says so)."""
        found = self.by_name.get(call.name)
        return found is not None and found.needs_approval(call.arguments)


@dataclass(frozen=True, slots=True)
class Child:
    """A delegation call's child: its task id (None when none was made), and the result its
    call is answered with once known (its end, or why no child was made)."""

    task: str | None
    result: ToolResult | None = None


@dataclass(slots=True)
class TurnState:
    """Where a turn stands: the context it was given (sent first, never changed), what it
    produced so far (in order), the verdicts on its last answer's gated calls, and the
    children of its delegation calls (by call id)."""

    plan: TurnPlan
    context: tuple[Message, ...]
    produced: list[Message]
    decided: Decided | None = None
    children: dict[str, Child] = field(default_factory=dict)

    def add(self, message: Message) -> None:
        if isinstance(message, AssistantMessage):
            self.children.clear()  # they were the last answer's (call ids may repeat)
        self.produced.append(message)

    @property
    def sent(self) -> tuple[Message, ...]:
        """What the next model call is sent: the context, then what the turn produced."""
        return (*self.context, *self.produced)


@dataclass(frozen=True, slots=True)
class CallModel:
    request: ModelRequest


@dataclass(frozen=True, slots=True)
class RunTool:
    """Run ``call`` of ``answer``; ``tool`` is None when no such tool is offered (the model is
    told which are: ``offered``). ``approved``: the verdict of an approved call, whose start
    is recorded before it runs."""

    answer: AssistantMessage
    call: ToolCall
    tool: RunnableTool | None
    approved: Verdict | None = None
    offered: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Settle:
    """Answer ``call`` with ``result`` without running it."""

    answer: AssistantMessage
    call: ToolCall
    result: ToolResult


@dataclass(frozen=True, slots=True)
class AwaitDecision:
    answer: AssistantMessage
    waiting: tuple[ToolCall, ...]
    trace: Mapping[str, str] = field(default_factory=dict, compare=False)
    """The suspended invocation's W3C context (tracing on): its approvals' waits join it."""


@dataclass(frozen=True, slots=True)
class Finish:
    answer: AssistantMessage


@dataclass(frozen=True, slots=True)
class Ended:
    call: ToolCall
    result: ToolResult


@dataclass(frozen=True, slots=True)
class OutOfRounds:
    rounds: int


@dataclass(frozen=True, slots=True)
class Delegate:
    """Make the child of ``call`` (a delegation tool's call of ``answer``) and of each of
    ``more``: the answer's later calls that would be delegated next, one after another, had
    ``call``'s child been made (a call already waiting on its child between them is passed
    over, as the planner passes it over; the first that would be another step stops them)."""

    answer: AssistantMessage
    call: ToolCall
    more: tuple[ToolCall, ...] = ()

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        return (self.call, *self.more)


@dataclass(frozen=True, slots=True)
class AwaitChildren:
    """Every call of ``answer`` left unanswered waits on its child (``waiting``)."""

    answer: AssistantMessage
    waiting: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class Repeated:
    """``call`` would be the ``count``-th asking for its tool with these arguments."""

    answer: AssistantMessage
    call: ToolCall
    count: int

    @property
    def digest(self) -> str:
        return call_digest(self.call.name, self.call.arguments)


Step = (
    CallModel
    | RunTool
    | Settle
    | AwaitDecision
    | Finish
    | Ended
    | OutOfRounds
    | Delegate
    | AwaitChildren
    | Repeated
)


def decided_result(call: ToolCall, verdict: Verdict, agent: str, turn: str) -> ToolResult:
    """What the model is told of a call that was not approved."""
    if verdict.decision == "expired":
        content = f"{EXPIRED} (tool {call.name!r})"
    else:
        why = f": {verdict.reason}" if verdict.reason else " (no reason was given)"
        content = f"{REFUSED} (tool {call.name!r}){why}"
    return ToolResult(call.id, call.name, content, True, agent, turn)


def _last_answer(messages: Sequence[Message]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], AssistantMessage):
            return index
    return None


def next_step(state: TurnState) -> Step:
    """The turn's next step, from its state alone."""
    plan, produced = state.plan, state.produced
    index = _last_answer(produced)
    if index is None:
        return CallModel(plan.request(state.sent))
    answer = produced[index]
    assert isinstance(answer, AssistantMessage)
    if not answer.tool_calls:
        if plan.text_answers and index == len(produced) - 1:
            return Finish(answer)
        return CallModel(plan.request(state.sent))
    results = {m.call_id: m for m in produced[index + 1 :] if isinstance(m, ToolResult)}
    if plan.ending:  # a task's work; a request turn has no ending tools
        for call in answer.tool_calls:
            found = results.get(call.id)
            if found is not None and not found.is_error and call.name in plan.ending:
                return Ended(call, found)
    pending = [c for c in answer.tool_calls if c.id not in results]
    if not pending:
        return CallModel(plan.request(state.sent))
    if plan.max_rounds is not None and len(pending) == len(answer.tool_calls):
        rounds = sum(1 for m in produced if isinstance(m, AssistantMessage) and m.tool_calls)
        if rounds > plan.max_rounds:
            return OutOfRounds(plan.max_rounds)
    decided = (
        state.decided if state.decided is not None and state.decided.answer == answer else None
    )
    verdicts: Mapping[str, Verdict] = decided.verdicts if decided is not None else {}
    waiting = tuple(c for c in pending if c.id not in verdicts and plan.waits(c))
    if waiting:
        return AwaitDecision(answer, waiting)
    on_children: list[ToolCall] = []
    for at, call in enumerate(pending):
        if call.name in plan.delegations:
            child = state.children.get(call.id)
            if child is not None and child.result is not None:
                return Settle(answer, call, child.result)
            if child is not None:
                on_children.append(call)
                continue
            return _repeated(state, answer, call) or Delegate(
                answer, call, _delegated_next(state, answer, pending[at + 1 :])
            )
        verdict = verdicts.get(call.id)
        if verdict is not None:
            settled = _settled(answer, call, verdict, decided)
            if settled is not None:
                return settled
        tool = plan.by_name.get(call.name)
        return _repeated(state, answer, call) or RunTool(answer, call, tool, verdict, plan.offered)
    return AwaitChildren(answer, tuple(on_children))


def _settled(
    answer: AssistantMessage, call: ToolCall, verdict: Verdict, decided: Decided | None
) -> Settle | None:
    """A gated call answered without running: refused or expired, or its approved run cut
    off (its start was recorded)."""
    if verdict.decision != "approved":
        return Settle(answer, call, decided_result(call, verdict, answer.agent, answer.turn))
    if decided is not None and call.id in decided.started:
        cut = ToolResult(call.id, call.name, CUT_OFF_RUN, True, answer.agent, answer.turn)
        return Settle(answer, call, cut)
    return None


def _delegated_next(
    state: TurnState, answer: AssistantMessage, after: Sequence[ToolCall]
) -> tuple[ToolCall, ...]:
    """The calls of ``after`` the planner would delegate next, in order, once the child of
    the call before them is made: delegation calls with no child, none the ``max_repeats``-th
    of its kind; those waiting on a child already are passed over; any other stops it (a
    call to run or settle, a repeated one: it is the next step then)."""
    found: list[ToolCall] = []
    for call in after:
        if call.name not in state.plan.delegations:
            break
        child = state.children.get(call.id)
        if child is not None and child.result is not None:
            break
        if child is not None:
            continue
        if _repeated(state, answer, call) is not None:
            break
        found.append(call)
    return tuple(found)


def _repeated(state: TurnState, answer: AssistantMessage, call: ToolCall) -> Repeated | None:
    limit = state.plan.max_repeats
    if limit is None:
        return None
    count = twins(state.produced, answer, call)
    return Repeated(answer, call, count) if count >= limit else None
