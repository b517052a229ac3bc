"""The console's team pages and a moderated conversation's section. Pure, every value escaped.

- :func:`teams_page` (``/console/teams``): the service's teams (lead, members, the caller's
  items by state) and its moderated conversations.
- :func:`backlog_page` (``/console/teams/{team}``): a team's backlog as ``GET
  /v1/teams/{team}/items`` answers it (the items the caller may read): its counts by state,
  then each item: its type, state, who claimed it (member agent and instance), how long ago it
  was claimed or ended, what it depends on, why it failed or was cancelled. The most recent
  :data:`MAX_ITEMS` are shown; the counts cover all.
- :func:`conversation_section`: a ``conversation:<name>:<session>`` session's runs, from its
  journal: each turn with its speaker, each skipped turn with why, where the run was cut off
  (and why, when recorded) and gone on with, and how the run ended. Every record of a run is
  marked with its kind (``data-record``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from html import escape

from ankka.runtime.declare.teams import Conversation, Team
from ankka.runtime.records.conversations import (
    CUT_BY,
    ConversationCutOff,
    ConversationEnded,
    ConversationResumed,
    TurnSkipped,
)
from ankka.runtime.records.messages import AssistantMessage, UserMessage
from ankka.runtime.records.registry import Entry
from ankka.runtime.serve.console.pages import page, when
from ankka.runtime.store.team_statements import Item

__all__ = [
    "MAX_ITEMS",
    "MAX_RUNS",
    "STATES",
    "ago",
    "backlog_page",
    "conversation_section",
    "teams_page",
]

MAX_ITEMS = 200  # items a backlog page shows (the most recently added)
MAX_RUNS = 20  # a conversation's runs its section shows (the latest)
STATES = ("waiting", "ready", "claimed", "completed", "failed", "cancelled")


def ago(then: datetime, now: datetime) -> str:
    """How long before ``now`` ``then`` was, in the largest unit that fits, with the exact
    time in ``<time datetime>``."""
    seconds = max(int((now - then).total_seconds()), 0)
    if seconds < 120:
        said = f"{seconds} s ago"
    elif seconds < 7200:
        said = f"{seconds // 60} min ago"
    elif seconds < 172800:
        said = f"{seconds // 3600} h ago"
    else:
        said = f"{seconds // 86400} days ago"
    return f'<time datetime="{escape(then.isoformat())}">{said}</time>'


def _counts(items: Sequence[Item]) -> str:
    counted = Counter(i.state for i in items)
    cells = "".join(
        f'<td class="n" data-count="{state}">{counted.get(state, 0)}</td>' for state in STATES
    )
    head = "".join(f'<th class="n">{state}</th>' for state in STATES)
    return (
        f'<table id="counts"><thead><tr>{head}</tr></thead><tbody><tr>{cells}</tr></tbody></table>'
    )


def teams_page(
    teams: Sequence[tuple[Team, Sequence[Item]]], conversations: Sequence[Conversation]
) -> str:
    """The teams, each with the items of it the caller may read counted by state."""
    if teams:
        rows = "".join(
            f'<tr data-team="{escape(t.name)}"><td><a href="/console/teams/{escape(t.name)}">'
            f"{escape(t.name)}</a></td><td>{escape(str(t.lead))}</td>"
            f"<td>{escape(', '.join(t.member_names))}</td>"
            + "".join(f'<td class="n">{sum(1 for i in items if i.state == s)}</td>' for s in STATES)
            + "</tr>"
            for t, items in teams
        )
        head = "".join(f'<th class="n">{s}</th>' for s in STATES)
        table = (
            '<table id="teams"><thead><tr><th>team</th><th>lead</th><th>members</th>'
            f"{head}</tr></thead><tbody>{rows}</tbody></table>"
        )
    else:
        table = '<p class="empty">This service declares no team.</p>'
    talks = "".join(
        f'<li data-conversation="{escape(c.name)}">{escape(c.name)}: '
        f"{escape(', '.join(c.speaker_names))}</li>"
        for c in conversations
    )
    spoken = (
        "<h2>Moderated conversations</h2><p>Each session is on the sessions page as "
        f'<code>conversation:NAME:SESSION</code>.</p><ul id="conversations">{talks}</ul>'
        if conversations
        else ""
    )
    return page("teams", f"<h1>Teams</h1>{table}{spoken}")


def _claimed(item: Item, now: datetime) -> tuple[str, str]:
    """Who claimed it, and how long ago it was claimed (or, once final, ended)."""
    who = (
        f'<span class="agent">{escape(item.claimed_by[0])}</span> '
        f'<span class="instance">{escape(item.claimed_by[1])}</span>'
        if item.claimed_by
        else "-"
    )
    if item.final:
        since = f"ended {ago(item.updated_at, now)}"
    elif item.claimed_at is not None and item.state == "claimed":
        since = f"claimed {ago(item.claimed_at, now)}"
    else:
        since = f"added {ago(item.created_at, now)}"
    return who, since


def _row(item: Item, now: datetime) -> str:
    who, since = _claimed(item, now)
    depends = ", ".join(item.body.depends_on) or "-"
    return (
        f'<tr data-item="{escape(item.id)}" data-state="{escape(item.state)}">'
        f"<td>{escape(item.id)}</td><td>{escape(item.body.type)}</td>"
        f'<td class="state">{escape(item.state)}</td><td class="claimed-by">{who}</td>'
        f'<td class="since">{since}</td><td>{escape(depends)}</td>'
        f'<td class="n">{item.priority}</td>'
        f'<td class="reason">{escape(item.reason or "-")}</td>'
        f'<td><a href="/console/tasks/{escape(item.task)}">its task</a></td></tr>'
    )


def backlog_page(team: Team, items: Sequence[Item], *, now: datetime) -> str:
    """``team``'s backlog: the items the caller may read, in the order they were added."""
    shown = items[-MAX_ITEMS:]
    left_out = len(items) - len(shown)
    note = (
        f'<p class="muted" id="older">{left_out} older item(s) are not shown; the counts '
        "cover them.</p>"
        if left_out
        else ""
    )
    table = (
        '<table id="items"><thead><tr><th>item</th><th>type</th><th>state</th>'
        '<th>claimed by</th><th>when</th><th>depends on</th><th class="n">priority</th>'
        f"<th>reason</th><th></th></tr></thead><tbody>"
        f"{''.join(_row(i, now) for i in shown)}</tbody></table>"
        if shown
        else '<p class="empty">No item on this backlog.</p>'
    )
    body = (
        f"<h1>Team {escape(team.name)}</h1>"
        f'<p class="muted">lead {escape(str(team.lead))} · members '
        f"{escape(', '.join(team.member_names))} · as of {when(now)}</p>"
        f'<div data-refresh="5"><h2>Backlog</h2>{_counts(items)}{note}{table}</div>'
    )
    return page(f"team {team.name}", body)


def _runs(entries: Sequence[Entry]) -> dict[str, list[object]]:
    """The conversation's records by run (a message's turn id), in the order written."""
    runs: dict[str, list[object]] = {}
    for entry in entries:
        record = entry.record
        if isinstance(record, _SHOWN):
            runs.setdefault(record.turn or "", []).append(record)
    return runs


_TURNS = (AssistantMessage, TurnSkipped, ConversationCutOff, ConversationResumed)
_SHOWN = (UserMessage, *_TURNS, ConversationEnded)  # a run's records; the rest are its work's


def _step(record: object) -> str:
    kind = escape(getattr(record, "kind", ""))
    if isinstance(record, UserMessage):
        return (
            f'<p class="message" data-record="{kind}"><span class="role">message</span>'
            f"{escape(record.content)}</p>"
        )
    if isinstance(record, AssistantMessage) and record.tool_calls:  # its speaker's work
        names = ", ".join(c.name for c in record.tool_calls)
        return (
            f'<li class="tools muted" data-speaker="{escape(record.agent)}" data-record="{kind}">'
            f"{escape(record.agent)} called {escape(names)}</li>"
        )
    if isinstance(record, AssistantMessage):
        return (
            f'<li class="spoke" data-speaker="{escape(record.agent)}" data-record="{kind}">'
            f'<span class="role speaker">{escape(record.agent)}</span>'
            f'<span class="msg">{escape(record.content or "")}</span></li>'
        )
    if isinstance(record, TurnSkipped):
        return (
            f'<li class="skipped" data-speaker="{escape(record.speaker)}" '
            f'data-reason="{escape(record.reason)}" data-record="{kind}">'
            f'<span class="role speaker">{escape(record.speaker)}</span> skipped: '
            f"{escape(record.reason)} "
            f'<span class="muted">({escape(record.detail)})</span></li>'
        )
    if isinstance(record, ConversationCutOff):
        why = CUT_BY.get(record.cause, record.cause)
        return (
            f'<li class="cut" data-cause="{escape(record.cause)}" data-record="{kind}">'
            f"<strong>Cut off</strong>: {escape(why)} "
            f'<span class="muted">({escape(record.cause)}; the same message goes on with the '
            "run)</span></li>"
        )
    if isinstance(record, ConversationResumed):
        return (
            f'<li class="resumed" data-record="{kind}"><strong>Gone on with</strong> '
            '<span class="muted">(its message sent again)</span></li>'
        )
    assert isinstance(record, ConversationEnded)
    return (
        f'<p class="ended" data-reason="{escape(record.reason)}" data-record="{kind}">Ended: '
        f"<strong>{escape(record.reason)}</strong> — {escape(record.detail)}</p>"
    )


def conversation_section(entries: Sequence[Entry]) -> str:
    """Each run of the conversation (the latest :data:`MAX_RUNS`): its message, each turn with
    its speaker (skipped ones with why; where it was cut off and gone on with, in order), and
    its end's reason (none yet: it is running, or cut off)."""
    runs = list(_runs(entries).items())
    left_out = max(len(runs) - MAX_RUNS, 0)
    parts = []
    for number, (turn, records) in enumerate(runs[left_out:], left_out + 1):
        message = "".join(_step(r) for r in records if isinstance(r, UserMessage))
        turns = "".join(_step(r) for r in records if isinstance(r, _TURNS))
        ended = [r for r in records if isinstance(r, ConversationEnded)]
        end = _step(ended[-1]) if ended else '<p class="ended muted">Not ended yet.</p>'
        parts.append(
            f'<section class="run" data-run="{escape(turn)}"><h3>Run {number}</h3>{message}'
            f'<ol class="speakers">{turns}</ol>{end}</section>'
        )
    note = f'<p class="muted">{left_out} earlier run(s) are not shown.</p>' if left_out else ""
    return f'<h2>Conversation</h2><div id="conversation">{note}{"".join(parts)}</div>'
