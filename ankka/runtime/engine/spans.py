"""The engine's spans, named as OpenTelemetry's GenAI conventions say (docs/observability.md).

Made only when tracing is on (``ankka serve`` found ``OTEL_*`` configured): the
:class:`~ankka.runtime.drivers.context.Context` then holds an :class:`EngineSpans` and the
executor and the loop use it; with tracing off they hold ``None`` and pay one ``is None`` test
per step, importing nothing of OpenTelemetry. Because every kind of work is the one loop,
every driver gets the same spans:

- ``invoke_agent {agent}`` (INTERNAL) per turn id, opened by :class:`Track` as the loop goes:
  one for a request turn (and one more for its resume after an approval), one per task
  iteration (a resumed iteration after a restart too, ``ankka.turn.resumed``). Its parent is
  whatever is current when the driver runs the loop: the request's SERVER span, or the task's
  recorded context (drivers/tasks).
- ``chat {model}`` (CLIENT) per model call attempt (a retried call is two), current while the
  provider's HTTP client sends, so the gateway's spans are its children;
- ``execute_tool {tool}`` (INTERNAL) per tool run, current while the tool runs;
- ``ankka.judgment {model}`` per judgment asked (a judged guardrail, a judgment handler).

Spans carry no message content unless :attr:`EngineSpans.content` (opt-in; see
:mod:`.span_content`), and never an exception's text: a failure is its ``error.type``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import Token
from datetime import datetime
from typing import TYPE_CHECKING

from ankka._kernel import genai
from ankka._kernel.errors import AnkkaError
from ankka.runtime.declare.judgments.seam import Inquiry, JudgmentProvider, ProviderJudgment
from ankka.runtime.engine import span_content
from ankka.runtime.engine.steps import RunTool, TurnState
from ankka.runtime.providers.base import ModelProvider, ModelRequest, ModelResponse
from ankka.runtime.records.approvals import ApprovalDecided
from ankka.runtime.records.iterations import iteration_of
from ankka.runtime.records.messages import AssistantMessage, ToolCall, ToolResult, Usage
from ankka.runtime.records.tasks import TASK_SESSION_PREFIX

if TYPE_CHECKING:
    from opentelemetry.context import Context as OtelContext
    from opentelemetry.trace import Span, SpanKind, Tracer

__all__ = ["EngineSpans", "Track", "context_of", "provider_name"]

Attributes = dict[str, str | int | bool | list[str]]
_DESCRIPTION_LIMIT = 1024


def provider_name(provider: object) -> str:
    """``gen_ai.provider.name`` of a model provider: the API it speaks (``openai``,
    ``anthropic``), ``_OTHER`` when it does not say."""
    return str(getattr(provider, "gen_ai_provider", "_OTHER"))


def context_of(carrier: Mapping[str, str] | None) -> OtelContext | None:
    """The OpenTelemetry context a recorded carrier (``traceparent``...) stands for; None
    when there is none."""
    if not carrier:
        return None
    from opentelemetry import propagate

    return propagate.extract(dict(carrier))


def _usage(usage: Usage) -> Attributes:
    found: Attributes = {
        genai.INPUT_TOKENS: usage.input_tokens,
        genai.OUTPUT_TOKENS: usage.output_tokens,
    }
    if usage.cache_read_tokens:
        found[genai.CACHE_READ_TOKENS] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        found[genai.CACHE_CREATION_TOKENS] = usage.cache_write_tokens
    return found


def _error_type(exc: BaseException) -> str:
    return exc.kind if isinstance(exc, AnkkaError) else type(exc).__qualname__


def _nanos(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000_000)


def _has_error(span: Span) -> bool:
    attributes = getattr(span, "attributes", None) or {}
    return genai.ERROR_TYPE in attributes


def _failed(span: Span, error: str) -> None:
    from opentelemetry.trace import StatusCode

    span.set_attribute(genai.ERROR_TYPE, error)
    span.set_status(StatusCode.ERROR)


class EngineSpans:
    """The engine's tracer and whether content is recorded; shared by every driver.

    What a span costs is OpenTelemetry's SDK making, attributing and ending it, so each span
    is started with its attributes in one dict, gets what its work adds in one more, and is
    made current by attaching it directly (:class:`_Current`, not the SDK's nested generator
    context managers); a span the sampler did not record (``is_recording()`` false) is given
    nothing after its start, and content (opted in) is built only for a recorded span.
    docs/benchmarks.md has the figures."""

    def __init__(self, tracer: Tracer, *, content: bool = False) -> None:
        # Every OpenTelemetry module the spans use, imported here, once, on the thread that
        # builds the context: never first on a worker thread while turns run.
        import opentelemetry.propagate  # noqa: F401
        from opentelemetry import context, trace

        self.tracer = tracer
        self.content = content
        self._attach = context.attach
        self._detach = context.detach
        self._in_context = trace.set_span_in_context
        self._client = trace.SpanKind.CLIENT
        self._internal = trace.SpanKind.INTERNAL

    def track(self, state: TurnState, provider: ModelProvider, session: str) -> Track:
        """The invocation spans of one pass of the loop over ``state``."""
        return Track(self, state, provider, session)

    # --- inference -------------------------------------------------------------------------

    async def chat(
        self,
        provider: ModelProvider,
        request: ModelRequest,
        ask: Callable[[], Awaitable[ModelResponse]],
        *,
        session: str = "",
        stream: bool = False,
    ) -> ModelResponse:
        """``ask()`` in a ``chat`` CLIENT span (current while it runs, so the request it sends
        carries the span's context), described by the request and the response."""
        model = provider.model
        attributes: Attributes = {
            genai.OPERATION_NAME: "chat",
            genai.PROVIDER_NAME: provider_name(provider),
            genai.REQUEST_MODEL: model,
            genai.OUTPUT_TYPE: "json" if request.output is not None else "text",
            genai.REQUEST_STREAM: stream,
        }
        if session:
            attributes[genai.CONVERSATION_ID] = session
        if request.max_output_tokens is not None:
            attributes[genai.REQUEST_MAX_TOKENS] = request.max_output_tokens
        with self.span(genai.chat_span_name(model), attributes, client=True) as span:
            recording = span.is_recording()
            if recording and self.content:
                span.set_attributes(
                    {
                        genai.SYSTEM_INSTRUCTIONS: span_content.system_instructions(
                            request.instructions
                        ),
                        genai.INPUT_MESSAGES: span_content.input_messages(request.messages),
                    }
                )
            response = await ask()
            if recording:
                found = _usage(response.usage)
                found[genai.RESPONSE_MODEL] = response.model or model
                if response.finish_reason:
                    found[genai.RESPONSE_FINISH_REASONS] = [response.finish_reason]
                if self.content:
                    answer = AssistantMessage(response.content, response.tool_calls)
                    shown = span_content.output_messages(answer, response.finish_reason)
                    found[genai.OUTPUT_MESSAGES] = shown
                span.set_attributes(found)
            return response

    # --- tools ---------------------------------------------------------------------------

    async def tool(self, step: RunTool, run: Callable[[], Awaitable[ToolResult]]) -> ToolResult:
        """``run()`` in an ``execute_tool`` span, current while the tool runs."""
        call = step.call
        attributes: Attributes = {
            genai.OPERATION_NAME: "execute_tool",
            genai.TOOL_NAME: call.name,
            genai.TOOL_CALL_ID: call.id,
            genai.TOOL_TYPE: str(getattr(step.tool, "tool_type", "function")),
        }
        if step.tool is not None and step.tool.spec.description:
            attributes[genai.TOOL_DESCRIPTION] = step.tool.spec.description[:_DESCRIPTION_LIMIT]
        if step.approved is not None:
            attributes["ankka.approval.id"] = step.approved.approval
        with self.span(genai.execute_tool_span_name(call.name), attributes) as span:
            recording = span.is_recording()
            if recording and self.content:
                span.set_attribute(genai.TOOL_CALL_ARGUMENTS, span_content.bounded(call.arguments))
            result = await run()
            if not recording:
                return result
            if step.tool is None:
                _failed(span, "unknown_tool")
            elif result.is_error and not _has_error(span):  # a tool may have said what failed
                _failed(span, "tool_error")
            elif self.content:
                span.set_attribute(genai.TOOL_CALL_RESULT, span_content.bounded(result.content))
            return result

    @contextmanager
    def delegation(self, call: ToolCall) -> Iterator[Span]:
        """A delegation tool's call, making (or finding) its child task, in an
        ``execute_tool`` span; current inside, so the child records this trace."""
        attributes: Attributes = {
            genai.OPERATION_NAME: "execute_tool",
            genai.TOOL_NAME: call.name,
            genai.TOOL_CALL_ID: call.id,
            genai.TOOL_TYPE: "function",
            "ankka.delegation": True,
        }
        with self.span(genai.execute_tool_span_name(call.name), attributes) as span:
            yield span

    # --- approvals -----------------------------------------------------------------------

    def approval_wait(
        self,
        approval: str,
        tool: str,
        call_id: str | None,
        requested: datetime,
        decided: ApprovalDecided,
        asked: Mapping[str, str] | None = None,
    ) -> None:
        """An approval's wait, from its turn's suspension to its decision, as a span of its
        own (made, start and end, as the decision is recorded, under what is current then:
        the deciding request's span, linked to the ``invoke_agent`` that asked, ``asked``'s
        context; with nothing current, an expiry's timer, a child of that ``invoke_agent``)."""
        from opentelemetry import trace

        asking = trace.get_current_span(context_of(asked)).get_span_context() if asked else None
        parent, links = None, []
        if asking is not None and asking.is_valid:
            if trace.get_current_span().get_span_context().is_valid:
                links = [trace.Link(asking)]
            else:
                parent = context_of(asked)
        attributes: Attributes = {
            genai.TOOL_NAME: tool,
            "ankka.approval.id": approval,
            "ankka.approval.decision": decided.decision,
            "ankka.turn": decided.turn,
        }
        if call_id:
            attributes[genai.TOOL_CALL_ID] = call_id
        span = self.tracer.start_span(
            f"ankka.approval {tool}",
            context=parent,
            attributes=attributes,
            links=links,
            start_time=_nanos(requested),
        )
        span.end(end_time=max(_nanos(decided.at), _nanos(requested)))

    # --- judgments -----------------------------------------------------------------------

    def judges(self, judges: Mapping[str, JudgmentProvider]) -> dict[str, JudgmentProvider]:
        """``judges``, each asked in an ``ankka.judgment`` span."""
        return {name: _TracedJudge(judge, self) for name, judge in judges.items()}

    # --- spans and contexts -----------------------------------------------------------------

    def span(self, name: str, attributes: Attributes, *, client: bool = False) -> _Current:
        """A span (INTERNAL, or CLIENT for a call out), current inside; an exception that
        leaves it sets its ``error.type`` (never its text)."""
        return _Current(self, name, attributes, self._client if client else self._internal)

    def start(
        self, name: str, attributes: Attributes, kind: SpanKind
    ) -> tuple[Span, Token[OtelContext]]:
        """A span started (its attributes given at once) and attached as the current one,
        with the token :meth:`end` detaches."""
        span = self.tracer.start_span(
            name,
            kind=kind,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
        return span, self._attach(self._in_context(span))

    def end(self, span: Span, token: Token[OtelContext]) -> None:
        """``span`` no longer current (``token`` detached), then ended."""
        self._detach(token)
        span.end()

    @contextmanager
    def under(self, carrier: Mapping[str, str]) -> Iterator[None]:
        """Inside, the recorded context ``carrier`` is current (a task's, so its iterations'
        spans are in its trace); nothing changes when it is empty."""
        parent = context_of(carrier)
        if parent is None:
            yield
            return
        from opentelemetry import context

        token = context.attach(parent)
        try:
            yield
        finally:
            context.detach(token)


class _Current:
    """:meth:`EngineSpans.span`'s span, current while its block runs: started and attached on
    entry, detached and ended on exit, an exception's type its ``error.type``. A class, not a
    generator's context manager: entering and leaving it calls nothing else."""

    __slots__ = ("_attributes", "_kind", "_name", "_spans", "_token", "span")

    def __init__(
        self, spans: EngineSpans, name: str, attributes: Attributes, kind: SpanKind
    ) -> None:
        self._spans = spans
        self._name = name
        self._attributes = attributes
        self._kind = kind

    def __enter__(self) -> Span:
        self.span, self._token = self._spans.start(self._name, self._attributes, self._kind)
        return self.span

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if exc is not None:
            _failed(self.span, _error_type(exc))
        self._spans.end(self.span, self._token)


class _TracedJudge:
    """A judgment provider asked in its own span (the model call it makes, over its own
    transport, carries the span's context on)."""

    def __init__(self, inner: JudgmentProvider, spans: EngineSpans) -> None:
        self._inner = inner
        self._spans = spans

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def inner(self) -> JudgmentProvider:
        return self._inner

    async def judge(self, inquiry: Inquiry) -> ProviderJudgment:
        attributes: Attributes = {
            genai.REQUEST_MODEL: self._inner.name,
            "ankka.judgment.questions": len(inquiry.questions),
        }
        with self._spans.span(f"ankka.judgment {self._inner.name}", attributes) as span:
            judgment = await self._inner.judge(inquiry)
            if span.is_recording():
                found = _usage(judgment.usage)
                if judgment.model:
                    found[genai.RESPONSE_MODEL] = judgment.model
                span.set_attributes(found)
            return judgment


class Track:
    """The ``invoke_agent`` spans of one pass of the loop: one per turn id the loop works on,
    each current (attached) while its turn's steps run, ended when the turn changes or the
    pass ends. A task's iteration ends as its next model call is about to be asked for, so
    what its driver does between iterations (reading the task, listing MCP tools) is not
    counted in either."""

    def __init__(
        self, spans: EngineSpans, state: TurnState, provider: ModelProvider, session: str
    ) -> None:
        self._spans = spans
        self._state = state
        self._provider = provider
        self._session = session
        self._turn: str | None = None
        self._span: Span | None = None
        self._token: Token[OtelContext] | None = None
        self._usage = Usage()
        self._calls = 0

    def calling(self) -> None:
        """A model call is next: a task's iteration whose answer is recorded is over."""
        if self._span is None or self._state.plan.text_answers:
            return
        last = next(
            (m for m in reversed(self._state.produced) if isinstance(m, AssistantMessage)), None
        )
        if last is not None and last.turn == self._turn:
            self._end("iterated")

    def turn(self, turn: str, *, resumed: bool = False) -> None:
        """The steps that follow are ``turn``'s: its span is opened (the last one ended)."""
        if turn == self._turn and self._span is not None:
            return
        if self._span is not None:
            self._end("iterated")
        plan, provider, session = self._state.plan, self._provider, self._session
        attributes: Attributes = {
            genai.OPERATION_NAME: "invoke_agent",
            genai.PROVIDER_NAME: provider_name(provider),
            genai.AGENT_NAME: plan.agent,
            genai.REQUEST_MODEL: provider.model,
            "ankka.turn": turn,
        }
        if session:
            attributes[genai.CONVERSATION_ID] = session
        if session.startswith(TASK_SESSION_PREFIX):
            attributes["ankka.task.id"] = session.removeprefix(TASK_SESSION_PREFIX)
            number = iteration_of(turn)
            if number is not None:
                attributes["ankka.task.iteration"] = number
        if resumed:
            attributes["ankka.turn.resumed"] = True
        self._span, self._token = self._spans.start(
            genai.invoke_agent_span_name(plan.agent), attributes, self._spans._internal
        )
        self._turn = turn
        self._usage = Usage()
        self._calls = 0

    def carrier(self) -> dict[str, str]:
        """The open ``invoke_agent`` span's W3C context (``traceparent``...), recorded with a
        suspension so its approvals' waits join it; ``{}`` when none is open."""
        if self._span is None:
            return {}
        from opentelemetry import propagate, trace

        found: dict[str, str] = {}
        propagate.inject(found, context=trace.set_span_in_context(self._span))
        return found

    def answered(self, answer: AssistantMessage) -> None:
        """An answer of the current turn came back: its tokens count on the span."""
        if answer.call is not None:
            self._usage = self._usage + answer.call.usage
            self._calls += 1

    def ended(self, outcome: str) -> None:
        """The pass ended as ``outcome`` (``finished``, ``ended``, ``awaiting_approval``,
        ``out_of_rounds``, ``stopped``)."""
        self._end(outcome)

    def failed(self, exc: BaseException) -> None:
        if self._span is not None:
            _failed(self._span, _error_type(exc))
        self._end("failed")

    def _end(self, outcome: str) -> None:
        span, token = self._span, self._token
        if span is None or token is None:
            return
        if span.is_recording():
            found = _usage(self._usage)
            found["ankka.model_calls"] = self._calls
            found["ankka.turn.outcome"] = outcome
            span.set_attributes(found)
        self._spans.end(span, token)
        self._span = self._token = None
