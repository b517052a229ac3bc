"""The one executor: carries out the steps the planner (:mod:`.steps`) decides.

Every driver's model calls, tool runs, guardrails and typed answers go through here, so a
capability added here is every agent's:

- a model call (:meth:`Executor.call`): streamed when the driver streams, timed and accounted
  in the turn's :class:`Ledger` as it returns (so a turn that then fails can still account
  for it), and retried after a failure that may pass (``ModelError.retryable``) when the
  driver gives a :class:`Retry` (a task's iterations retry without spending their budget);
- a tool call (:meth:`Executor.settle`): run, or answered with what the planner decided, and
  emitted to a streaming caller; a tool that fails is an error result, never a failed turn;
- guardrails (:meth:`Executor.guard`), judged ones with the service's judgment providers,
  their tokens kept in the ledger;
- a typed answer decoded (:func:`decode`), a failure if it does not.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ValidationError

from ankka._kernel.clock import Clock
from ankka._kernel.errors import ModelError, TurnFailed
from ankka.runtime.declare.guardrails import AnyGuardrail, first_refusal
from ankka.runtime.declare.judgments.guardrail import Judging
from ankka.runtime.declare.judgments.seam import JudgmentProvider
from ankka.runtime.engine.steps import RunTool, Settle
from ankka.runtime.providers.base import ModelProvider, ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.retry import Retried
from ankka.runtime.records.messages import AssistantMessage, ModelCall, ToolCall, ToolResult, Usage

if TYPE_CHECKING:
    from ankka.runtime.engine.spans import EngineSpans

__all__ = ["ANSWER", "RUNNING", "Emit", "Executor", "Ledger", "LoopEvent", "Retry", "decode"]

LoopEvent = TextDelta | ToolCall | ToolResult
Emit = Callable[[LoopEvent], Awaitable[None]]
RUNNING: ContextVar[ToolCall | None] = ContextVar("ankka_running_call", default=None)
"""The call whose tool is running (in the turn's task): what a server's question names."""
ANSWER: ContextVar[AssistantMessage | None] = ContextVar("ankka_running_answer", default=None)
"""The answer whose call is running: a tool that must do its work once per call (a lead's
backlog item, docs/teams.md) derives its id from the answer's turn and the call's place."""


@dataclass(slots=True)
class Ledger:
    """What one turn spent: its model calls as they returned, and what its judged guardrails
    spent (``judging``)."""

    judging: Judging
    calls: list[ModelCall] = field(default_factory=list)

    @property
    def usage(self) -> Usage:
        total = Usage()
        for call in self.calls:
            total = total + call.usage
        return total


class Retry(Protocol):
    """A driver's answer to a failed model call that may pass if made again (the
    ``attempt``-th failure of this call in a row): return to try again (after its own pause),
    raise to give up."""

    async def failed(self, error: ModelError, attempt: int) -> None: ...


class Executor:
    """Shared by every driver of a runtime; holds no turn's state (that is the ledger's)."""

    def __init__(
        self,
        *,
        clock: Clock,
        judges: Mapping[str, JudgmentProvider],
        retried: Retried | None = None,
        spans: EngineSpans | None = None,
    ) -> None:
        """``retried`` hears each call made again (provider, model, the error's kind);
        ``spans``: the engine's spans when tracing is on (None: nothing is traced)."""
        self.clock = clock
        self.judges = judges
        self.retried = retried
        self.spans = spans

    def ledger(self, calls: Sequence[ModelCall] = ()) -> Ledger:
        """A turn's ledger; ``calls``: those it made before (a resumed turn's)."""
        return Ledger(Judging(self.judges), list(calls))

    async def guard(
        self, guardrails: Sequence[AnyGuardrail], text: str, *, stage: str, ledger: Ledger
    ) -> None:
        """Run ``guardrails`` on ``text`` in order; raise ``Refused`` at the first refusal."""
        await first_refusal(guardrails, text, stage=stage, judging=ledger.judging)

    async def call(
        self,
        provider: ModelProvider,
        request: ModelRequest,
        *,
        agent: str,
        turn: str,
        ledger: Ledger,
        emit: Emit | None = None,
        retry: Retry | None = None,
        session: str = "",
    ) -> AssistantMessage:
        """Ask the model; the answer, accounted in ``ledger``. The vendor's state rides on the
        answer (never journaled), so the turn's next call can replay it. A failure that may
        pass is given to ``retry`` (the one retry layer: the SDKs retry nothing), unless a
        stream already showed the caller part of an answer."""
        attempt = 0
        while True:
            started = self.clock.monotonic()
            shown: list[bool] = []
            try:
                if self.spans is None:
                    response = await _ask(provider, request, emit, shown)
                else:  # each attempt its own chat span
                    ask = partial(_ask, provider, request, emit, shown)
                    stream = emit is not None
                    response = await self.spans.chat(
                        provider, request, ask, session=session, stream=stream
                    )
            except ModelError as exc:
                attempt += 1
                if retry is None or not exc.retryable or shown:
                    raise
                await retry.failed(exc, attempt)
                if self.retried is not None:
                    self.retried(provider.name, provider.model, exc.kind)
                continue
            call = ModelCall(
                provider=provider.name,
                model=response.model or provider.model,
                agent=agent,
                latency_ms=(self.clock.monotonic() - started) * 1000.0,
                usage=response.usage,
            )
            ledger.calls.append(call)
            return AssistantMessage(
                response.content,
                response.tool_calls,
                agent,
                turn,
                call,
                provider_state=response.provider_state,
            )

    async def settle(self, step: RunTool | Settle, *, emit: Emit | None = None) -> ToolResult:
        """The result of one call: the tool's, or the one the planner decided."""
        if emit is not None:
            await emit(step.call)
        if isinstance(step, Settle):
            result = step.result
        elif self.spans is None:
            result = await _run(step)
        else:
            result = await self.spans.tool(step, partial(_run, step))
        if emit is not None:
            await emit(result)
        return result


async def _ask(
    provider: ModelProvider, request: ModelRequest, emit: Emit | None, shown: list[bool]
) -> ModelResponse:
    if emit is None:
        return await provider.complete(request)
    final: ModelResponse | None = None
    async for item in provider.stream(request):
        if isinstance(item, TextDelta):
            shown.append(True)
            await emit(item)
        else:
            final = item
    if final is None:
        raise TurnFailed(f"model provider {provider.name!r} ended its stream without an answer")
    return final


async def _run(step: RunTool) -> ToolResult:
    call, answer = step.call, step.answer
    if step.tool is None:
        offered = ", ".join(sorted(step.offered)) or "none"
        content = f"there is no tool named {call.name!r}; the tools offered are: {offered}"
        return ToolResult(call.id, call.name, content, True, answer.agent, answer.turn)
    token, running = RUNNING.set(call), ANSWER.set(answer)
    try:
        outcome = await step.tool.run(call.arguments)
    finally:
        ANSWER.reset(running)
        RUNNING.reset(token)
    return ToolResult(
        call.id, call.name, outcome.content, outcome.is_error, answer.agent, answer.turn
    )


def decode(answer_type: type[BaseModel], text: str, agent: str) -> BaseModel:
    """A typed answer, or :class:`TurnFailed` saying where it did not decode."""
    try:
        return answer_type.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "the answer"
        raise TurnFailed(
            f"agent {agent!r} asked for a {answer_type.__name__} answer but the model's answer "
            f"did not decode ({where}: {first['msg']}); nothing of this turn was written"
        ) from exc
