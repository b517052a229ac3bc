"""The console's task timeline (serve/console/waterfall.py), pure: bars from the journal's
own times and each call's latency, escaped, bounded; the link to the collector's UI."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ankka.runtime.records.approvals import ApprovalDecided, TurnSuspended
from ankka.runtime.records.messages import (
    AssistantMessage,
    ModelCall,
    ToolCall,
    ToolResult,
    Usage,
    UserMessage,
)
from ankka.runtime.records.registry import Entry, Record
from ankka.runtime.serve.console.waterfall import MAX_ROWS, Row, rows_of, trace_link, waterfall

T0 = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def _at(seconds: float, record: Record, seq: int = 0) -> Entry:
    return Entry(seq, T0 + timedelta(seconds=seconds), record)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _answer(turn: str, latency_ms: float) -> AssistantMessage:
    call = ModelCall("default", "small", "a", latency_ms, Usage(1, 1))
    return AssistantMessage(None, (ToolCall("c1", "lookup", "{}"),), "a", turn, call=call)


def test_an_iterations_bars_are_its_span_its_calls_and_its_tools() -> None:
    entries = [
        _at(0, UserMessage("go", "a", "t#1")),
        _at(2, _answer("t#1", 1500)),
        _at(5, ToolResult("c1", "lookup", "found", False, "a", "t#1")),
        _at(6, _answer("t#2", 800)),
    ]
    rows = rows_of(entries)
    assert rows == [
        Row("t#1", 0, at(0), at(5)),
        Row("chat small", 1, at(0.5), at(2)),
        Row("execute_tool lookup", 1, at(2), at(5)),
        Row("t#2", 0, at(5.2), at(6)),
        Row("chat small", 1, at(5.2), at(6)),
    ]


def test_an_approvals_wait_is_a_bar_from_the_suspension_to_the_decision() -> None:
    entries = [
        _at(1, _answer("t#1", 10)),
        _at(1, TurnSuspended("t#1", "a", "", (), ())),
        _at(61, ApprovalDecided("ap-1", "t#1", "approved", "", "ann", T0)),
    ]
    waits = [r for r in rows_of(entries) if r.name.startswith("approval")]
    assert waits == [
        Row("approval approved", 1, T0 + timedelta(seconds=1), T0 + timedelta(seconds=61))
    ]


def test_the_html_escapes_names_and_bounds_its_rows() -> None:
    odd = ToolResult("c", "<script>", "x", False, "a", "t#1")
    html = waterfall([_at(0, UserMessage("go", "a", "t#1")), _at(1, odd)])
    assert "<script>" not in html and "execute_tool &lt;script&gt;" in html
    many = [_at(i, ToolResult("c", "lookup", "x", False, "a", "t#1")) for i in range(400)]
    drawn = waterfall(many)
    assert drawn.count("<tr data-depth") == MAX_ROWS
    assert "left out" in drawn
    assert "No work recorded yet." in waterfall([])


def test_the_trace_link_needs_a_recorded_context_and_a_ui() -> None:
    carrier = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    link = trace_link("http://jaeger:16686/", carrier)
    assert 'href="http://jaeger:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736"' in link
    templated = trace_link("https://ui/t?id={trace_id}&x=1", carrier)
    assert 'href="https://ui/t?id=4bf92f3577b34da6a3ce929d0e0e4736&amp;x=1"' in templated
    assert trace_link("", carrier) == ""
    assert trace_link("http://jaeger:16686", {}) == ""
    assert trace_link("http://j", {"traceparent": '00-"><script>-00f067aa0ba902b7-01'}) == ""
