"""The engine's spans (engine/spans.py) on the scripted provider, recorded by OpenTelemetry's
SDK in memory: one ``invoke_agent`` per turn id, a ``chat`` per model call attempt and an
``execute_tool`` per tool run, each a child of its turn's span, with the GenAI conventions'
attributes; a task's iterations each their own ``invoke_agent``; content only when opted in.
The same spans against a real backend: tests/integration/test_engine_tracing.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind

from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.declare.autonomous import Accepts, AutonomousAgent
from ankka.runtime.declare.tools import tool
from ankka.runtime.engine.spans import EngineSpans
from ankka.runtime.judgments import ScriptedJudgmentProvider, YesNo, refuse_if_yes
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.messages import ToolResult, Usage
from ankka.runtime.store import trace_statements
from examples.tasks import summary
from examples.team import service as team
from tests.support.runtimes import runtime_for
from tests.support.stores import journal_store
from tests.unit.runtime.conftest import MakeHost, finished, put
from tests.unit.runtime.drivers.tasks.test_iteration import Flaky

TEAM_SCRIPT = json.loads(Path("examples/team-standin.json").read_text())


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
def broken(key: str) -> str:
    """Always fails."""
    raise RuntimeError("sk-secret-in-a-failure")


def _service() -> Service:
    service = Service("traced")

    @service.agent("main")
    def main(request: TurnRequest) -> Turn:
        return Turn(message=request.message, instructions="Be brief.", tools=[lookup, broken])

    return service


def _calls(*names: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
    turn: dict[str, Any] = {"tool_calls": [{"name": n, "arguments": {"key": "k"}} for n in names]}
    if usage is not None:
        turn["usage"] = usage
    return turn


def _researcher() -> Service:
    service = Service("tasks")
    service.autonomous(
        AutonomousAgent(name="researcher", tools=[lookup], accepts=[Accepts(summary, budget=5)])
    )
    return service


@pytest.fixture
def recorded() -> Iterator[tuple[EngineSpans, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield EngineSpans(provider.get_tracer("ankka")), exporter
    provider.shutdown()


def _named(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_a_request_turn_is_one_invoke_agent_with_its_chats_and_tools_as_children(
    tmp_path: Path, recorded: tuple[EngineSpans, InMemorySpanExporter]
) -> None:
    spans, exporter = recorded
    script: list[dict[str, Any] | str] = [
        _calls("lookup", usage={"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 4}),
        _calls("lookup", "broken", usage={"input_tokens": 20, "output_tokens": 3}),
        {"text": "done", "usage": {"input_tokens": 30, "output_tokens": 5}},
    ]
    provider = ScriptedProvider(script, name="default")
    store = await journal_store(tmp_path / "s.sqlite3")
    async with runtime_for(
        _service(), store=store, providers={"default": provider}, spans=spans
    ) as rt:
        await rt.run(rt.plan("main", "s1", "go"))

    ended = exporter.get_finished_spans()
    (agent,) = _named(ended, "invoke_agent")
    chats = sorted(_named(ended, "chat "), key=lambda s: s.start_time or 0)
    tools = sorted(_named(ended, "execute_tool"), key=lambda s: s.start_time or 0)
    assert agent.name == "invoke_agent main"
    assert [c.name for c in chats] == ["chat scripted"] * 3
    assert [t.name for t in tools] == [
        "execute_tool lookup",
        "execute_tool lookup",
        "execute_tool broken",
    ]
    assert len(ended) == 1 + 3 + 3, [s.name for s in ended]
    assert agent.parent is None
    assert {s.context.trace_id for s in ended} == {agent.context.trace_id}
    assert {_parent(s) for s in [*chats, *tools]} == {agent.context.span_id}

    a = agent.attributes or {}
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.name"] == "main"
    assert a["gen_ai.conversation.id"] == "s1"
    assert a["gen_ai.provider.name"] == "ankka.scripted"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (60, 10)
    assert a["ankka.model_calls"] == 3
    assert a["ankka.turn.outcome"] == "finished"

    first, second, last = (c.attributes or {} for c in chats)
    assert chats[0].kind == SpanKind.CLIENT
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.request.model"] == "scripted"
    assert first["gen_ai.response.model"] == "scripted"
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert first["gen_ai.usage.input_tokens"] == 10
    assert first["gen_ai.usage.cache_read.input_tokens"] == 4
    assert "gen_ai.usage.cache_read.input_tokens" not in second
    assert last["gen_ai.response.finish_reasons"] == ("stop",)
    assert last["gen_ai.usage.output_tokens"] == 5

    ok, _, failed = (t.attributes or {} for t in tools)
    assert ok["gen_ai.tool.name"] == "lookup"
    assert ok["gen_ai.tool.type"] == "function"
    assert ok["gen_ai.tool.description"] == "Look a key up."
    assert "error.type" not in ok
    assert failed["error.type"] == "tool_error"
    # Content is opt-in: nothing said, no argument, no result, no failure's text.
    for span in ended:
        shown = repr(dict(span.attributes or {}))
        assert "gen_ai.input.messages" not in shown and "gen_ai.tool.call.result" not in shown
        assert "sk-secret" not in shown and "value of" not in shown


async def test_content_is_recorded_when_opted_in_and_redacted(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans = EngineSpans(provider.get_tracer("ankka"), content=True)
    key = "sk-" + "a" * 40
    script: list[dict[str, Any] | str] = [_calls("lookup"), f"the key is {key}"]
    scripted = ScriptedProvider(script, name="default")
    store = await journal_store(tmp_path / "s.sqlite3")
    async with runtime_for(
        _service(), store=store, providers={"default": scripted}, spans=spans
    ) as rt:
        await rt.run(rt.plan("main", "s1", "go"))
    ended = exporter.get_finished_spans()
    chat = _named(ended, "chat ")[-1].attributes or {}
    assert '"content":"go"' in str(chat["gen_ai.input.messages"])
    assert "Be brief." in str(chat["gen_ai.system_instructions"])
    assert "the key is" in str(chat["gen_ai.output.messages"])
    assert key not in str(chat["gen_ai.output.messages"])
    (run,) = _named(ended, "execute_tool")
    assert (run.attributes or {})["gen_ai.tool.call.result"] == "value of k"


async def test_a_trace_the_sampler_drops_records_nothing_and_the_turn_is_the_same(
    tmp_path: Path,
) -> None:
    # Spans that are not recording (OTEL_TRACES_SAMPLER dropped the trace) are given nothing
    # after their start, content opted in is not built for them: the turn, its tool results
    # (a failing tool's too) and its answer are what an untraced turn gives.
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans = EngineSpans(provider.get_tracer("ankka"), content=True)
    answers = []
    for traced in (spans, None):
        script: list[dict[str, Any] | str] = [_calls("lookup", "broken"), "done"]
        scripted = ScriptedProvider(script, name="default")
        store = await journal_store(tmp_path / f"{traced is None}.sqlite3")
        async with runtime_for(
            _service(), store=store, providers={"default": scripted}, spans=traced
        ) as rt:
            result = await rt.run(rt.plan("main", "s1", "go"))
            sent = scripted.requests[-1].messages
            results = [(m.content, m.is_error) for m in sent if isinstance(m, ToolResult)]
            answers.append((result.reply, results))
    assert answers[0] == answers[1]
    reply, results = answers[0]
    assert reply == "done"
    assert results[0] == ("value of k", False) and results[1][1] is True
    assert exporter.get_finished_spans() == ()
    provider.shutdown()


async def test_a_tasks_iterations_are_each_an_invoke_agent_and_a_retry_is_two_chats(
    make_host: MakeHost, recorded: tuple[EngineSpans, InMemorySpanExporter]
) -> None:
    spans, exporter = recorded
    service = _researcher()
    done = {"title": "t", "points": ["p"]}
    script = [
        _calls("lookup", usage={"input_tokens": 7, "output_tokens": 1}),
        {
            "tool_calls": [{"name": "complete_task", "arguments": done}],
            "usage": {"input_tokens": 9, "output_tokens": 2},
        },
    ]
    host = await make_host(service, Flaky(1, script), spans=spans)
    await put(host, "t1")
    assert (await finished(host, "t1")).state.value == "completed"

    ended = exporter.get_finished_spans()
    agents = sorted(_named(ended, "invoke_agent"), key=lambda s: s.start_time or 0)
    assert [(s.attributes or {})["ankka.task.iteration"] for s in agents] == [1, 2]
    for span in agents:
        attributes = span.attributes or {}
        assert span.name == "invoke_agent researcher"
        assert attributes["ankka.task.id"] == "t1"
        assert attributes["gen_ai.conversation.id"] == "task:t1"
    first, second = agents
    assert (first.attributes or {})["gen_ai.usage.input_tokens"] == 7
    assert (second.attributes or {})["gen_ai.usage.input_tokens"] == 9
    # The first iteration's first attempt failed (the model was down) and was asked again:
    # two chat spans under it, the failed one saying why.
    under_first = [s for s in _named(ended, "chat ") if _parent(s) == first.context.span_id]
    assert [(s.attributes or {}).get("error.type") for s in under_first] == [
        "model_unavailable",
        None,
    ]
    (run,) = _named(ended, "execute_tool lookup")
    assert _parent(run) == first.context.span_id
    (complete,) = _named(ended, "execute_tool complete_task")
    assert _parent(complete) == second.context.span_id


async def test_a_judged_guardrail_is_its_own_span_without_the_text(
    tmp_path: Path, recorded: tuple[EngineSpans, InMemorySpanExporter]
) -> None:
    spans, exporter = recorded
    service = Service("judged")
    rail = refuse_if_yes(YesNo("abusive", "Is it abusive?"), at_least=0.8, reason="abusive")

    @service.agent("helper")
    def helper(request: TurnRequest) -> Turn:
        return Turn(message=request.message, input_guardrails=[rail])

    judge = ScriptedJudgmentProvider(
        {"abusive": {"yes": 0.1, "no": 0.9}}, usage=Usage(input_tokens=40, output_tokens=1)
    )
    scripted = ScriptedProvider(["fine"], name="default")
    store = await journal_store(tmp_path / "s.sqlite3")
    async with runtime_for(
        service,
        store=store,
        providers={"default": scripted},
        judges={"default": judge},
        spans=spans,
    ) as rt:
        await rt.run(rt.plan("helper", "s1", "Where is my parcel?"))
    ended = exporter.get_finished_spans()
    (judged,) = _named(ended, "ankka.judgment")
    attributes = judged.attributes or {}
    assert attributes["ankka.judgment.questions"] == 1
    assert attributes["gen_ai.usage.input_tokens"] == 40
    assert "Where is my parcel" not in repr(dict(attributes))


async def test_a_tasks_iterations_are_in_the_trace_current_when_it_was_put(
    make_host: MakeHost, recorded: tuple[EngineSpans, InMemorySpanExporter]
) -> None:
    spans, exporter = recorded
    service = _researcher()
    done = {"tool_calls": [{"name": "complete_task", "arguments": {"title": "t", "points": ["p"]}}]}
    provider = ScriptedProvider([_calls("lookup"), done, _calls("lookup"), done], name="default")
    host = await make_host(service, provider, spans=spans)
    with spans.tracer.start_as_current_span("PUT /v1/agents/{agent}/tasks/{task}") as opened:
        await put(host, "t1")
    put_span = opened.get_span_context()
    with spans.tracer.start_as_current_span("another request"):
        await put(host, "t1")  # made again: the task stays in its first trace
    assert (await finished(host, "t1")).state.value == "completed"
    await put(host, "t2")  # no span current: a task of its own traces
    assert (await finished(host, "t2")).state.value == "completed"

    recorded_context = await host.store.read(lambda tx: trace_statements.get(tx, "t1"))
    assert recorded_context["traceparent"].split("-")[2] == f"{put_span.span_id:016x}"
    assert await host.store.read(lambda tx: trace_statements.get(tx, "t2")) == {}
    ended = exporter.get_finished_spans()
    agents = _named(ended, "invoke_agent")
    first = [s for s in agents if (s.attributes or {})["ankka.task.id"] == "t1"]
    assert len(first) == 2
    assert {_parent(s) for s in first} == {put_span.span_id}
    assert {s.context.trace_id for s in first} == {put_span.trace_id}
    second = [s for s in agents if (s.attributes or {})["ankka.task.id"] == "t2"]
    assert len(second) == 2 and all(s.parent is None for s in second)


async def test_a_recorded_context_is_bounded_and_only_a_w3c_carrier(make_host: MakeHost) -> None:
    host = await make_host(_researcher(), ScriptedProvider([], name="default"))

    async def record(task: str, carrier: dict[str, str]) -> dict[str, str]:
        await host.store.write(lambda tx: trace_statements.record(tx, task, carrier))
        found: dict[str, str] = await host.store.read(lambda tx: trace_statements.get(tx, task))
        return found

    assert await record("a", {"baggage": "k=v"}) == {}  # no traceparent: nothing
    assert await record("b", {"traceparent": "00-" + "a" * 5000}) == {}  # too large
    secret = {"traceparent": "00-x", "authorization": "secret"}
    assert await record("c", secret) == {"traceparent": "00-x"}  # only the W3C keys
    assert await record("c", {"traceparent": "00-y"}) == {"traceparent": "00-x"}  # first stays


async def test_a_delegated_tree_is_one_trace_children_under_the_delegation_span(
    make_host: MakeHost, recorded: tuple[EngineSpans, InMemorySpanExporter]
) -> None:
    spans, exporter = recorded
    host = await make_host(team, ScriptedProvider(TEAM_SCRIPT, name="default"), spans=spans)
    with spans.tracer.start_as_current_span("PUT /v1/agents/{agent}/tasks/{task}") as opened:
        await put(host, "r1", "Report on sqlite and postgresql.", agent="lead", kind="report")
    assert (await finished(host, "r1")).state.value == "completed"
    root = opened.get_span_context()

    ended = exporter.get_finished_spans()
    assert {s.context.trace_id for s in ended} == {root.trace_id}, "one trace for the tree"
    by_id = {s.context.span_id: s for s in ended}
    delegations = [s for s in ended if (s.attributes or {}).get("ankka.delegation")]
    assert sorted(s.name for s in delegations) == ["execute_tool delegate__researcher__summary"] * 2
    for child in ("r1:1.0", "r1:1.1"):
        agents = [
            s
            for s in _named(ended, "invoke_agent")
            if (s.attributes or {})["ankka.task.id"] == child
        ]
        assert agents and all(s.name == "invoke_agent researcher" for s in agents)
        parents = {_parent(s) for s in agents}
        assert len(parents) == 1
        (parent,) = parents
        assert parent is not None and by_id[parent] in delegations
        # The delegation span is a child of the lead's first iteration.
        lead = by_id[_parent(by_id[parent]) or 0]
        assert lead.name == "invoke_agent lead" and _parent(lead) == root.span_id
