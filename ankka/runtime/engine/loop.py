"""The loop: the platform's, not the agent's, and the same for every kind of work.

One pass: the planner (:func:`~.steps.next_step`) reads where the turn stands and says what
comes next; the executor (:class:`~.executor.Executor`) carries it out; the driver records it
when it chooses. Until the planner says the turn has ended:

- :class:`~.steps.Finish`: the last answer called no tool (a request's answer);
- :class:`~.steps.Ended`: a tool that ends the work answered (a task's ``complete_task``);
- :class:`~.steps.AwaitDecision`: calls wait for a person;
- :class:`~.steps.OutOfRounds`: the model still asks for tools past the limit;
- :class:`~.steps.AwaitChildren`: the calls left wait on the child tasks they made;
- :class:`~.steps.Repeated`: the next call repeats one asked for too often;
- :class:`Stopped`: the driver stopped before a model call (a task cancelled, its instance
  suspended, its budget spent).

Drivers (:mod:`ankka.runtime.drivers`) differ only in their :class:`Driver` hooks: when
they commit (a request turn at its end, in one batch; a resumed turn each call as it
returns; a task every answer and every tool result) and how they end. Each request is the
turn's context plus what it produced, appended: nothing sent is ever rewritten, so a
provider's prompt cache keeps hitting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel

from ankka._kernel import tracing
from ankka.runtime.engine.executor import Emit, Executor, Ledger, Retry
from ankka.runtime.engine.steps import (
    AwaitChildren,
    AwaitDecision,
    CallModel,
    Child,
    Delegate,
    Ended,
    Finish,
    OutOfRounds,
    Repeated,
    RunTool,
    Settle,
    TurnState,
    next_step,
)
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ModelCall,
    ToolCall,
    ToolResult,
    Usage,
)

if TYPE_CHECKING:
    from ankka.runtime.engine.spans import Track

__all__ = ["Delegator", "Driver", "End", "Stopped", "TurnOutcome", "TurnSuspension", "drive"]


@dataclass(frozen=True, slots=True)
class Stopped:
    """The driver stopped the work before its next model call."""


End = Finish | Ended | AwaitDecision | OutOfRounds | AwaitChildren | Repeated | Stopped


class Delegator(Protocol):
    """How a kind of work that delegates makes its calls' children (a task's driver)."""

    async def delegate(
        self, state: TurnState, step: Delegate, traces: Mapping[str, Mapping[str, str]]
    ) -> dict[str, Child]:
        """Make (or find, on a replay) the children of ``step.calls``, by call id, in one
        transaction; a child with a result already is one that was refused (nothing made) or
        has ended. ``traces``: each call's ``execute_tool`` span context (tracing on), which
        its child records as its trace."""
        ...


class Driver(Protocol):
    """How one kind of work records its steps; every hook may raise to end the work."""

    async def before_call(self, state: TurnState) -> str | None:
        """The turn id of the answer about to be asked for, or None to stop first."""
        ...

    async def answered(self, state: TurnState, answer: AssistantMessage) -> bool:
        """Record (or keep) ``answer``; False drops it and the model is asked again."""
        ...

    async def starting(self, state: TurnState, step: RunTool) -> None:
        """An approved call is about to run: record its start (spending the approval)."""
        ...

    async def ran(self, state: TurnState, result: ToolResult) -> ToolResult:
        """Record (or keep) a call's result; what is returned is what the model is sent."""
        ...


async def drive(
    state: TurnState,
    *,
    executor: Executor,
    provider: ModelProvider,
    driver: Driver,
    ledger: Ledger,
    emit: Emit | None = None,
    stream: bool = False,
    retry: Retry | None = None,
    delegator: Delegator | None = None,
    session: str = "",
) -> End:
    """Take steps until the turn ends; ``emit`` hears each tool call and result (and, with
    ``stream``, the answer's text as it comes); ``delegator`` makes the children of a plan's
    delegation calls. ``session`` names the conversation on the spans (when tracing is on,
    :mod:`.spans`: an ``invoke_agent`` span per turn id)."""
    spans = executor.spans
    track = spans.track(state, provider, session) if spans is not None else None
    try:
        end = await _steps(state, executor, provider, driver, ledger, emit, stream, retry,
                           delegator, session, track)  # fmt: skip
    except BaseException as exc:
        if track is not None:
            track.failed(exc)
        raise
    if track is not None:
        if isinstance(end, AwaitDecision):  # recorded with the suspension, for its waits
            end = replace(end, trace=track.carrier())
        track.ended(_OUTCOMES.get(type(end)) or type(end).__name__.lower())
    return end


_OUTCOMES: dict[type, str] = {
    Finish: "finished",
    Ended: "ended",
    AwaitDecision: "awaiting_approval",
    OutOfRounds: "out_of_rounds",
    Stopped: "stopped",
    AwaitChildren: "awaiting_children",
    Repeated: "repeated_call",
}


async def _steps(
    state: TurnState,
    executor: Executor,
    provider: ModelProvider,
    driver: Driver,
    ledger: Ledger,
    emit: Emit | None,
    stream: bool,
    retry: Retry | None,
    delegator: Delegator | None,
    session: str,
    track: Track | None,
) -> End:
    while True:
        step = next_step(state)
        if isinstance(step, CallModel):
            if track is not None:
                track.calling()
            turn = await driver.before_call(state)
            if turn is None:
                return Stopped()
            if track is not None:
                track.turn(turn)
            answer = await executor.call(
                provider,
                step.request,
                agent=state.plan.agent,
                turn=turn,
                ledger=ledger,
                emit=emit if stream else None,
                retry=retry,
                session=session,
            )
            if track is not None:
                track.answered(answer)
            if await driver.answered(state, answer):
                state.add(answer)
        elif isinstance(step, RunTool | Settle):
            if track is not None:  # a resumed turn starts here, with no model call
                track.turn(step.answer.turn, resumed=True)
            if isinstance(step, RunTool) and step.approved is not None:
                await driver.starting(state, step)
            state.add(await driver.ran(state, await executor.settle(step, emit=emit)))
        elif isinstance(step, Delegate):
            assert delegator is not None, "a plan with delegation tools has a delegator"
            traces: dict[str, Mapping[str, str]] = {}
            if track is not None and executor.spans is not None:
                # Each call in an execute_tool span, its child recorded in that span's trace;
                # the children are then made together, in one transaction.
                track.turn(step.answer.turn, resumed=True)
                for call in step.calls:
                    with executor.spans.delegation(call):
                        traces[call.id] = tracing.carrier()
            state.children.update(await delegator.delegate(state, step, traces))
        else:
            return step


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """What a finished turn produced: its messages (the user's first), the answer, the tokens."""

    turn: str
    messages: tuple[Message, ...]
    text: str
    value: BaseModel | None
    usage: Usage
    calls: tuple[ModelCall, ...]

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        return tuple(m for m in self.messages if isinstance(m, ToolResult))


@dataclass(frozen=True, slots=True)
class TurnSuspension:
    """The turn stopped before running the calls of its last answer: some wait for a person.
    ``messages`` end with that answer; ``waiting`` are the calls that need a decision."""

    turn: str
    messages: tuple[Message, ...]
    waiting: tuple[ToolCall, ...]
    trace: Mapping[str, str] = field(default_factory=dict, compare=False)
    """The ``invoke_agent`` span's W3C context (tracing on; :class:`~.steps.AwaitDecision`)."""
