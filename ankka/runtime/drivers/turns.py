"""A request agent's turn over the engine, fresh or resumed: one driver, two ways to start.

:func:`take_turn` plans the turn's effect (:func:`plan_of`), runs the input guardrails (a fresh
turn; a resumed one passed them when it started), and drives the engine
(:func:`ankka.runtime.engine.loop.drive`) until the model answers without a tool call, calls
wait for a person, or the rounds run out. The answer is decoded when typed and checked by the
output guardrails before anything is written. The caller commits (:mod:`.request`: one
batch at the end; :mod:`.approvals`: the resumed turn, under the session's turn lock).

A resumed turn differs only in its hooks: each model call is journaled as it returns
(:class:`~ankka.runtime.records.approvals.ResumedCall`) and each approved call's start before
it runs (:class:`~ankka.runtime.records.approvals.ApprovedCallStarted`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from ankka._kernel.errors import TurnFailed
from ankka.runtime.declare.agents import Turn
from ankka.runtime.drivers.context import Context
from ankka.runtime.engine import memory
from ankka.runtime.engine.executor import Emit, Ledger, decode
from ankka.runtime.engine.loop import TurnOutcome, TurnSuspension, drive
from ankka.runtime.engine.planning import PlannedTurn
from ankka.runtime.engine.session import SessionState
from ankka.runtime.engine.steps import (
    AwaitDecision,
    Decided,
    Finish,
    OutOfRounds,
    RunTool,
    TurnPlan,
    TurnState,
)
from ankka.runtime.providers.base import OutputSchema
from ankka.runtime.records.accounting import UnwrittenCalls
from ankka.runtime.records.judgments import JudgmentUsage
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ModelCall,
    ToolResult,
    UserMessage,
)
from ankka.runtime.records.registry import Record

__all__ = ["RequestDriver", "Resumption", "plan_of", "spent_records", "take_turn", "unwritten"]


def plan_of(effect: Turn, agent: str) -> TurnPlan:
    """What the engine runs of a request turn's effect."""
    answer_type = effect.answer_type
    output = (
        OutputSchema(answer_type.__name__, answer_type.model_json_schema())
        if answer_type is not None
        else None
    )
    return TurnPlan(
        agent=agent,
        instructions=effect.instructions,
        tools=tuple(effect.tools),
        output=output,
        reasoning_effort=effect.reasoning_effort,
        max_output_tokens=effect.max_output_tokens,
        max_rounds=effect.max_tool_rounds,
    )


@dataclass(frozen=True, slots=True)
class Resumption:
    """Going on with a suspended turn: the messages it had, and the verdicts on its last
    answer's calls. ``answered`` journals each model call as it returns; ``starting`` an
    approved call's start (both under the turn lock the resume holds)."""

    messages: tuple[Message, ...]
    decided: Decided
    answered: Callable[[ModelCall], Awaitable[None]]
    starting: Callable[[RunTool], Awaitable[None]]


class RequestDriver:
    """A request turn's hooks: everything is kept for the caller to commit at the end, but a
    resumed turn's calls and approved starts, which are journaled as they happen."""

    def __init__(self, turn: str, resume: Resumption | None) -> None:
        self.turn = turn
        self.resume = resume

    async def before_call(self, state: TurnState) -> str | None:
        return self.turn

    async def answered(self, state: TurnState, answer: AssistantMessage) -> bool:
        if self.resume is not None and answer.call is not None:
            await self.resume.answered(answer.call)
        return True

    async def starting(self, state: TurnState, step: RunTool) -> None:
        if self.resume is not None:
            await self.resume.starting(step)

    async def ran(self, state: TurnState, result: ToolResult) -> ToolResult:
        return result


async def take_turn(
    context: Context,
    planned: PlannedTurn,
    effect: Turn,
    folded: SessionState,
    turn: str,
    *,
    ledger: Ledger,
    emit: Emit | None = None,
    resume: Resumption | None = None,
) -> TurnOutcome | TurnSuspension:
    """Run one request turn (``effect`` is ``planned.effect`` with its MCP tools); every model
    call lands in ``ledger`` as it returns, so a caller can account for a turn that fails."""
    agent = planned.agent
    executor = context.executor
    if resume is None:
        await executor.guard(effect.input_guardrails, effect.message, stage="input", ledger=ledger)
        produced: list[Message] = [UserMessage(effect.message, agent, turn)]
    else:
        produced = list(resume.messages)
    state = TurnState(
        plan_of(effect, agent),
        tuple(memory.select(folded.view.messages, effect.memory)),
        produced,
        resume.decided if resume is not None else None,
    )
    end = await drive(
        state,
        executor=executor,
        provider=planned.provider,
        driver=RequestDriver(turn, resume),
        ledger=ledger,
        emit=emit,
        stream=effect.streams,
        retry=context.turn_retry,
        session=planned.session,
    )
    if isinstance(end, AwaitDecision):
        return TurnSuspension(turn, tuple(state.produced), end.waiting, end.trace)
    if isinstance(end, OutOfRounds):
        raise TurnFailed(
            f"agent {agent!r} still asked for tools after {end.rounds} tool rounds (its "
            "max_tool_rounds); nothing of this turn was written"
        )
    assert isinstance(end, Finish), f"a request turn cannot end with {end!r}"
    text = end.answer.content or ""
    answer_type = effect.answer_type
    value = decode(answer_type, text, agent) if answer_type is not None else None
    await executor.guard(effect.output_guardrails, text, stage="output", ledger=ledger)
    usage = ledger.usage
    final = AssistantMessage(text, (), agent, turn, end.answer.call, turn_usage=usage)
    messages = (*state.produced[:-1], final)
    return TurnOutcome(turn, messages, text, value, usage, tuple(ledger.calls))


def spent_records(ledger: Ledger, agent: str, turn: str) -> tuple[JudgmentUsage, ...]:
    """The turn's judgment usage record (none when no judged guardrail ran)."""
    judging = ledger.judging
    return (JudgmentUsage(judging.usage, agent, turn),) if judging.spent else ()


def unwritten(
    ledger: Ledger, agent: str, turn: str, reason: str, calls: Iterable[ModelCall] | None = None
) -> tuple[Record, ...]:
    """What a turn that writes no messages still records: its model calls (as
    :class:`UnwrittenCalls`) and its judged guardrails' tokens; empty when neither."""
    made = tuple(ledger.calls if calls is None else calls)
    records = (UnwrittenCalls(turn, agent, reason, made),) if made else ()
    return (*records, *spent_records(ledger, agent, turn))
