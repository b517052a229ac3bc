"""A task's work as a waterfall, from the journal's own timings: no collector needed. Pure.

Every record of the task's session carries when it was written (``Entry.at``); a model call
also carries its own latency. From them, per turn (a task iteration, ``task#N``):

- the iteration: from its first record to its last;
- ``chat {model}``: each answer's model call, ending when its answer was written and lasting
  the call's recorded latency;
- ``execute_tool {tool}``: each tool result, from the record before it in the iteration (the
  answer that asked for it, or the previous result) to when it was written;
- ``approval``: a suspended iteration's wait, from the suspension to each decision.

Bars are placed on one time axis (percent of the whole span), every value escaped. The rows
shown are bounded (:data:`MAX_ROWS`, the most recent); what is left out is said.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape

from ankka.runtime.records.approvals import ApprovalDecided, TurnSuspended
from ankka.runtime.records.messages import AssistantMessage, ToolResult
from ankka.runtime.records.registry import Entry

__all__ = ["MAX_ROWS", "Row", "rows_of", "trace_link", "waterfall"]

MAX_ROWS = 300


@dataclass(frozen=True, slots=True)
class Row:
    """One bar: what, how deep (0: an iteration), from when to when."""

    name: str
    depth: int
    start: datetime
    end: datetime


def _turn_of(record: object) -> str:
    return str(getattr(record, "turn", "") or "")


def _children(entries: Sequence[Entry]) -> list[Row]:
    rows: list[Row] = []
    previous: datetime | None = None
    suspended: datetime | None = None
    for entry in entries:
        record, at = entry.record, entry.at
        if isinstance(record, AssistantMessage) and record.call is not None:
            began = at - timedelta(milliseconds=record.call.latency_ms)
            rows.append(Row(f"chat {record.call.model}", 1, began, at))
        elif isinstance(record, ToolResult):
            rows.append(Row(f"execute_tool {record.name}", 1, previous or at, at))
        elif isinstance(record, TurnSuspended):
            suspended = at
        elif isinstance(record, ApprovalDecided):
            rows.append(Row(f"approval {record.decision}", 1, suspended or at, at))
        previous = at
    return rows


def rows_of(entries: Sequence[Entry]) -> list[Row]:
    """The bars of a session's records, turn by turn in the order they began."""
    turns: dict[str, list[Entry]] = {}
    for entry in entries:
        turn = _turn_of(entry.record)
        if turn:
            turns.setdefault(turn, []).append(entry)
    rows: list[Row] = []
    for turn, found in turns.items():
        children = _children(found)
        start = min([found[0].at, *(r.start for r in children)])
        rows.append(Row(turn, 0, start, max(e.at for e in found)))
        rows.extend(children)
    return rows


def _seconds(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def waterfall(entries: Sequence[Entry]) -> str:
    """The waterfall's HTML (a table of bars), or a line saying there is nothing yet."""
    rows = rows_of(entries)
    if not rows:
        return '<p class="empty" id="waterfall">No work recorded yet.</p>'
    left_out = max(0, len(rows) - MAX_ROWS)
    rows = rows[left_out:]
    start = min(r.start for r in rows)
    span = max((max(r.end for r in rows) - start).total_seconds(), 1e-3)
    lines = []
    for row in rows:
        offset = (row.start - start).total_seconds() / span * 100
        width = max((row.end - row.start).total_seconds() / span * 100, 0.3)
        indent = "padding-left:1.2em" if row.depth else "font-weight:bold"
        lines.append(
            f'<tr data-depth="{row.depth}"><td style="{indent}">{escape(row.name)}</td>'
            f'<td class="n">{_seconds(row.end - row.start)}</td>'
            '<td style="width:60%"><div style="position:relative;height:0.9em">'
            f'<div class="bar" style="position:absolute;left:{offset:.2f}%;'
            f'width:{min(width, 100 - offset):.2f}%;height:100%;background:#4c78a8"></div>'
            "</div></td></tr>"
        )
    note = f'<p class="muted">The first {left_out} bar(s) are left out.</p>' if left_out else ""
    return (
        f'<table id="waterfall"><thead><tr><th>what</th><th class="n">time</th>'
        f"<th>from {escape(start.isoformat(timespec='milliseconds'))}, "
        f"{_seconds(timedelta(seconds=span))} in all</th></tr></thead>"
        f"<tbody>{''.join(lines)}</tbody></table>{note}"
    )


def trace_link(ui: str, carrier: dict[str, str]) -> str:
    """A link to the task's trace in the collector's UI (``ANKKA_TRACE_UI_URL``: ``{trace_id}``
    in it is replaced, else ``/trace/<id>`` is appended, Jaeger's path), or ``""`` when the
    task has no recorded trace."""
    parts = carrier.get("traceparent", "").split("-")
    if not ui or len(parts) != 4 or len(parts[1]) != 32:
        return ""
    trace_id = parts[1]
    if not all(c in "0123456789abcdef" for c in trace_id):
        return ""
    url = (
        ui.replace("{trace_id}", trace_id)
        if "{trace_id}" in ui
        else f"{ui.rstrip('/')}/trace/{trace_id}"
    )
    return f'<p><a id="trace-link" href="{escape(url)}">its trace ({trace_id})</a></p>'
