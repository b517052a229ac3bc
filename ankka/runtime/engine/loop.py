"""The request loop: the platform's, not the agent's.

For one turn: input guardrails (before any model call) → assemble the request → call the
model → run the tools it asked for and call it again (at most ``max_tool_rounds`` round
trips) → decode a typed answer → output guardrails (before memory is written). The caller
(:mod:`ankka.runtime.drivers.request`) writes the returned messages to the journal, then replies.

The loop calls only seams: the provider, the tools and an optional ``emit`` for live events.
It never rewrites past context: each request is the history it was given plus this turn's
messages appended, so a provider's prompt cache keeps hitting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from ankka._kernel.clock import Clock
from ankka._kernel.errors import TurnFailed
from ankka.runtime.declare.agents import Turn
from ankka.runtime.declare.guardrails import first_refusal
from ankka.runtime.declare.judgments.guardrail import Judging
from ankka.runtime.declare.tools import RunnableTool, approval_of
from ankka.runtime.engine import memory
from ankka.runtime.providers.base import (
    ModelProvider,
    ModelRequest,
    ModelResponse,
    OutputSchema,
    TextDelta,
)
from ankka.runtime.records.messages import (
    AssistantMessage,
    Message,
    ModelCall,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)

__all__ = ["Emit", "LoopEvent", "Resume", "TurnOutcome", "TurnSuspension", "Verdict", "run_turn"]

LoopEvent = TextDelta | ToolCall | ToolResult
Emit = Callable[[LoopEvent], Awaitable[None]]


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


@dataclass(frozen=True, slots=True)
class Verdict:
    """A decided call: ``approved``, ``refused`` or ``expired``, and why."""

    approval: str
    decision: str
    reason: str


Start = Callable[[ToolCall, Verdict], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Resume:
    """Go on from a suspension: its messages, the verdict of every call that waited, and
    ``start``, which records an approved call's start (spending the approval) before it runs."""

    messages: tuple[Message, ...]
    verdicts: Mapping[str, Verdict]
    start: Start


REFUSED = "a person refused this call, so it was not run"
EXPIRED = "no one decided in time whether this call may run, so it was not run"


def decided_result(call: ToolCall, verdict: Verdict, agent: str, turn_id: str) -> ToolResult:
    """What the model is told of a call that was not approved."""
    if verdict.decision == "expired":
        content = f"{EXPIRED} (tool {call.name!r})"
    else:
        why = f": {verdict.reason}" if verdict.reason else " (no reason was given)"
        content = f"{REFUSED} (tool {call.name!r}){why}"
    return ToolResult(call.id, call.name, content, True, agent, turn_id)


def needs_approval(tools: Mapping[str, RunnableTool], call: ToolCall) -> bool:
    found = tools.get(call.name)
    rule = approval_of(found)
    if found is None or rule is None:
        return False
    check = getattr(found, "needs_approval", None)
    return bool(check(call.arguments)) if callable(check) else rule.always


async def run_turn(
    effect: Turn,
    *,
    history: Sequence[Message],
    agent: str,
    turn_id: str,
    provider: ModelProvider,
    clock: Clock,
    emit: Emit | None = None,
    spent: list[ModelCall] | None = None,
    resume: Resume | None = None,
    judging: Judging | None = None,
) -> TurnOutcome | TurnSuspension:
    """Run a turn, or go on with a suspended one (``resume``: its input guardrails passed
    when it started, and the calls of its last answer are settled first). Every model call is
    appended to ``spent`` as it returns, so a caller can account for the calls of a turn that
    then fails (see :mod:`ankka.runtime.records.accounting`); ``judging`` collects what its judged
    guardrails spend."""
    context = tuple(memory.select(history, effect.memory))
    tools = {t.name: t for t in effect.tools}
    calls: list[ModelCall] = spent if spent is not None else []
    usage = Usage()
    rounds = 0
    if resume is None:
        await first_refusal(effect.input_guardrails, effect.message, stage="input", judging=judging)
        produced: list[Message] = [UserMessage(effect.message, agent, turn_id)]
    else:
        produced = list(resume.messages)
        for m in produced:
            if isinstance(m, AssistantMessage) and m.call is not None:
                calls.append(m.call)
                usage = usage + m.call.usage
                rounds += 1
        last = produced[-1]
        assert isinstance(last, AssistantMessage)
        for tool_call in last.tool_calls:
            verdict = resume.verdicts.get(tool_call.id)
            if verdict is None or verdict.decision == "approved":
                if verdict is not None:
                    await resume.start(tool_call, verdict)
                produced.append(await _run_tool(tools, tool_call, agent, turn_id))
            else:
                produced.append(decided_result(tool_call, verdict, agent, turn_id))
    specs = tuple(t.spec for t in effect.tools)
    answer_type = effect.answer_type
    output = (
        OutputSchema(answer_type.__name__, answer_type.model_json_schema())
        if answer_type is not None
        else None
    )
    while True:
        request = ModelRequest(
            effect.instructions,
            (*context, *produced),
            specs,
            output,
            effect.reasoning_effort,
            max_output_tokens=effect.max_output_tokens,
        )
        started = clock.monotonic()
        response = await _call(provider, request, emit if effect.streams else None)
        call = ModelCall(
            provider=provider.name,
            model=response.model or provider.model,
            agent=agent,
            latency_ms=(clock.monotonic() - started) * 1000.0,
            usage=response.usage,
        )
        calls.append(call)
        usage = usage + response.usage
        if not response.tool_calls:
            break
        if rounds >= effect.max_tool_rounds:
            raise TurnFailed(
                f"agent {agent!r} still asked for tools after {effect.max_tool_rounds} tool "
                "rounds (its max_tool_rounds); nothing of this turn was written"
            )
        rounds += 1
        # The vendor's state (reasoning) rides on this turn's answers only: the journal's
        # encoding leaves it out, so it is replayed within the turn and never stored.
        produced.append(
            AssistantMessage(
                response.content,
                response.tool_calls,
                agent,
                turn_id,
                call,
                provider_state=response.provider_state,
            )
        )
        waiting = tuple(c for c in response.tool_calls if needs_approval(tools, c))
        if waiting:
            return TurnSuspension(turn_id, tuple(produced), waiting)
        for tool_call in response.tool_calls:
            if emit is not None:
                await emit(tool_call)
            result = await _run_tool(tools, tool_call, agent, turn_id)
            if emit is not None:
                await emit(result)
            produced.append(result)
    text = response.content or ""
    value = _decode(answer_type, text, agent) if answer_type is not None else None
    await first_refusal(effect.output_guardrails, text, stage="output", judging=judging)
    produced.append(AssistantMessage(text, (), agent, turn_id, call, turn_usage=usage))
    return TurnOutcome(turn_id, tuple(produced), text, value, usage, tuple(calls))


async def _call(provider: ModelProvider, request: ModelRequest, emit: Emit | None) -> ModelResponse:
    if emit is None:
        return await provider.complete(request)
    final: ModelResponse | None = None
    async for item in provider.stream(request):
        if isinstance(item, TextDelta):
            await emit(item)
        else:
            final = item
    if final is None:
        raise TurnFailed(f"model provider {provider.name!r} ended its stream without an answer")
    return final


async def _run_tool(
    tools: dict[str, RunnableTool], call: ToolCall, agent: str, turn_id: str
) -> ToolResult:
    found = tools.get(call.name)
    if found is None:
        offered = ", ".join(sorted(tools)) or "none"
        content = f"there is no tool named {call.name!r}; the tools offered are: {offered}"
        return ToolResult(call.id, call.name, content, True, agent, turn_id)
    outcome = await found.run(call.arguments)
    return ToolResult(call.id, call.name, outcome.content, outcome.is_error, agent, turn_id)


def _decode(answer_type: type[BaseModel], text: str, agent: str) -> BaseModel:
    try:
        return answer_type.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "the answer"
        raise TurnFailed(
            f"agent {agent!r} asked for a {answer_type.__name__} answer but the model's answer "
            f"did not decode ({where}: {first['msg']}); nothing of this turn was written"
        ) from exc
