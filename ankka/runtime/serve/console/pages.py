"""The console's HTML: pure functions from view values to text, every value escaped.

Plain server-rendered pages with one small script (``static/console.js``, which refreshes a
page's ``data-refresh`` region in place). Cost is shown as unknown: ankka counts tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ankka.runtime.drivers.request import SessionSummary
from ankka.runtime.records.messages import AssistantMessage, Message, ToolResult, Usage, UserMessage
from ankka.runtime.serve.console.charts import Bar, stacked_bars
from ankka.runtime.serve.console.listing import Listing, when
from ankka.runtime.serve.console.views import SessionView, TurnView

__all__ = [
    "USAGE_HEAD",
    "not_found",
    "page",
    "session_page",
    "sessions_page",
    "usage_cells",
    "when",
]

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:60rem;padding:1rem;color:#222}
h1{font-size:1.3rem}h2{font-size:1.1rem;margin-top:1.6rem}table{border-collapse:collapse}
td,th{padding:.2rem .6rem;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.turn{border:1px solid #ccc;border-radius:6px;padding:.5rem .8rem;margin:.6rem 0}
.msg{margin:.25rem 0;white-space:pre-wrap}.role{font-weight:600;margin-right:.4rem}
.tool-call code,.tool-result code{background:#f3f3f3;padding:0 .2rem}
form.filters{margin:.4rem 0}.pager a{margin:0 .6rem}
.error{color:#a00}.muted,.axis{color:#777;fill:#777;font-size:11px}nav a{margin-right:1rem}
"""
_IN, _OUT = "#4a7bd0", "#e0913a"


def page(title: str, body: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} · ankka console</title><style>{_STYLE}</style>"
        '<script src="/console/static/console.js" defer></script></head><body>'
        '<nav><a href="/console">sessions</a><a href="/console/tasks">tasks</a>'
        '<a href="/console/teams">teams</a>'
        '<a href="/console/approvals">approvals</a><a href="/console/mcp">MCP servers</a></nav>'
        f"{body}</body></html>"
    )


def usage_cells(usage: Usage) -> str:
    return "".join(f'<td class="n" data-usage="{k}">{v}</td>' for k, v in usage.as_dict().items())


USAGE_HEAD = (
    '<th class="n">input</th><th class="n">output</th>'
    '<th class="n">cache read</th><th class="n">cache write</th>'
)


def sessions_page(
    rows: Sequence[SessionSummary], asked: Listing, *, cursor: str | None, scanned: bool = False
) -> str:
    """One page of the sessions list, most recently active first: those ``asked``'s filters
    keep of the sessions the caller may read (the count of those it may not is not shown);
    ``cursor``: the next older page's; ``scanned``: the page stopped at the most sessions one
    page looks at, and its older link goes on from there."""
    if not rows:
        empty = "No session matches." if asked.chosen else "No sessions yet: ask an agent."
        table = f'<p class="empty">{empty}</p>'
    else:
        body = "".join(
            f'<tr data-session="{escape(s.session)}">'
            f'<td><a href="/console/sessions/{escape(s.session)}">{escape(s.session)}</a></td>'
            f"<td>{escape(', '.join(s.agents))}</td>"
            f'<td class="n">{s.turns}</td><td class="n">{s.messages}</td>'
            f"{usage_cells(s.usage)}<td>unknown</td>"
            f"<td>{'waiting' if s.awaiting else ''}</td><td>{when(s.updated_at)}</td></tr>"
            for s in rows
        )
        table = (
            '<table id="sessions"><thead><tr><th>session</th><th>agents</th>'
            f'<th class="n">turns</th><th class="n">messages</th>{USAGE_HEAD}<th>cost</th>'
            "<th>approval</th><th>last active</th></tr></thead>"
            f"<tbody>{body}</tbody></table>"
        )
    note = (
        '<p class="muted" id="scanned">This page looked through as many sessions as one page '
        "does; its older link goes on from where it stopped.</p>"
        if scanned
        else ""
    )
    return page(
        "sessions",
        f"<h1>Sessions</h1>{asked.form()}"
        f'<div data-refresh="5">{table}{asked.pager(cursor=cursor, shown=len(rows))}{note}</div>',
    )


def _message(message: Message) -> str:
    if isinstance(message, UserMessage):
        return (
            f'<div class="msg user"><span class="role">user</span>{escape(message.content)}</div>'
        )
    if isinstance(message, ToolResult):
        cls = "tool-result error" if message.is_error else "tool-result"
        return (
            f'<div class="msg {cls}" data-tool="{escape(message.name)}">'
            f'<span class="role">tool {escape(message.name)} ←</span>'
            f"<code>{escape(message.content)}</code></div>"
        )
    if isinstance(message, AssistantMessage):
        calls = "".join(
            f'<div class="msg tool-call" data-tool="{escape(c.name)}">'
            f'<span class="role">{escape(message.agent)} →</span>'
            f"<code>{escape(c.name)}({escape(c.arguments)})</code></div>"
            for c in message.tool_calls
        )
        text = (
            f'<div class="msg assistant"><span class="role">{escape(message.agent)}</span>'
            f"{escape(message.content)}</div>"
            if message.content
            else ""
        )
        return calls + text
    return f'<div class="msg"><span class="role">{escape(message.role)}</span></div>'


def _turn(index: int, turn: TurnView) -> str:
    calls = "".join(
        f"<tr><td>{escape(c.agent)}</td><td>{escape(c.provider)}</td><td>{escape(c.model)}</td>"
        f'<td class="n">{c.latency_ms:.0f} ms</td>{usage_cells(c.usage)}</tr>'
        for c in turn.calls
    )
    table = (
        '<table class="calls"><thead><tr><th>agent</th><th>provider</th><th>model</th>'
        f'<th class="n">latency</th>{USAGE_HEAD}</tr></thead><tbody>{calls}</tbody>'
        f'<tfoot><tr class="turn-usage"><td colspan="4">turn</td>{usage_cells(turn.usage)}'
        "</tr></tfoot></table>"
    )
    return (
        f'<section class="turn" data-turn="{escape(turn.turn)}">'
        f'<h3>Turn {index} <span class="muted">{escape(turn.agent)} · {escape(turn.turn)} · '
        f"{when(turn.at)}</span></h3>"
        f"{''.join(_message(m) for m in turn.messages)}{table if turn.calls else ''}"
        "</section>"
    )


def session_page(view: SessionView, *, extra: str = "") -> str:
    """The session's page; ``extra`` (already escaped HTML: its decisions, the requests
    waiting for one) goes above its tokens."""
    s = view.summary
    chart = stacked_bars(
        [
            Bar(str(i), (t.usage.input_tokens, t.usage.output_tokens))
            for i, t in enumerate(view.turns, 1)
        ],
        series=("input", "output"),
        colours=(_IN, _OUT),
        title="tokens per turn",
    )
    per = "".join(
        f'<tr data-agent="{escape(u.agent)}" data-model="{escape(u.model)}">'
        f'<td>{escape(u.agent)}</td><td>{escape(u.model)}</td><td class="n">{u.calls}</td>'
        f"{usage_cells(u.usage)}<td>unknown</td></tr>"
        for u in view.by_agent_model
    )
    totals = (
        f'<table id="totals"><thead><tr><th></th>{USAGE_HEAD}<th>cost</th></tr></thead>'
        f'<tbody><tr id="session-usage"><td>turns</td>{usage_cells(s.usage)}<td>unknown</td></tr>'
        f'<tr id="compaction-usage"><td>compaction</td>{usage_cells(s.compaction_usage)}'
        "<td>unknown</td></tr></tbody></table>"
    )
    agents = (
        '<table id="by-agent-model"><thead><tr><th>agent</th><th>model</th>'
        f'<th class="n">calls</th>{USAGE_HEAD}<th>cost</th></tr></thead><tbody>{per}</tbody>'
        "</table>"
    )
    compactions = (
        f'<p id="compactions">{s.compactions} compaction(s), {s.compaction_rejections} '
        "rejected.</p>"
        + "".join(
            f'<div class="msg summary"><span class="role">summary of {m.replaces} '
            f"messages</span>{escape(m.content)}</div>"
            for m in view.summaries
        )
    )
    turns = "".join(_turn(i, t) for i, t in enumerate(view.turns, 1))
    body = (
        f"<h1>Session {escape(view.session)}</h1>"
        f'<p class="muted" id="times">started {when(s.created_at)} · last active '
        f"{when(s.updated_at)}</p>"
        f'<div data-refresh="5"><p class="muted">{s.turns} turn(s), {s.messages} messages, '
        f"{s.pending} request(s) waiting. Cost: unknown (ankka counts tokens, not money).</p>"
        f"{extra}<h2>Tokens</h2>{chart}{totals}<h2>Per agent and model</h2>{agents}"
        f"<h2>Compactions</h2>{compactions}<h2>Turns</h2>{turns}</div>"
    )
    return page(f"session {view.session}", body)


def not_found(what: str) -> str:
    return page("not found", f"<h1>Not found</h1><p>{escape(what)}</p>")
