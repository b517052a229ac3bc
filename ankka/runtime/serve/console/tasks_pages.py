"""The console's task pages: pure functions from task records to HTML, every value escaped.

A task's page shows its state, the iterations used against its budget (an inline SVG bar),
its tokens (cost unknown), its result or reason, and a link to the session holding what was
done on it. Its live progress comes from the task's notifications stream
(``/v1/tasks/{task}/notifications``), which the console's script follows and lists.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape

from ankka.runtime.drivers.tasks.notify import EVENTS
from ankka.runtime.records.tasks import TaskRecord
from ankka.runtime.serve.console.charts import budget_bar
from ankka.runtime.serve.console.listing import Listing
from ankka.runtime.serve.console.pages import USAGE_HEAD, page, usage_cells, when

# What a task's notifications stream sends (tasks_http's TASK_EVENTS): the page's script
# listens for each, so a kind published is a kind shown.
_NAMES = " ".join(("snapshot", *EVENTS, "dropped"))

__all__ = ["task_page", "tasks_page"]


def _shown(record: TaskRecord) -> str:
    """How a person knows the task: the name its creator gave (a kubectl-applied Task's
    namespace/name), else its id."""
    return record.spec.name or record.id


def _iterations(record: TaskRecord) -> str:
    used = record.iterations_used
    return f'<span data-iterations="{used}">{used}</span> / {record.budget}'


def tasks_page(records: Sequence[TaskRecord], asked: Listing, *, cursor: str | None) -> str:
    """One page of the tasks list, newest first: those ``asked``'s filters keep (the store's
    query filtered them, and by the caller's read right); ``cursor``: the next older page's."""
    if not records:
        table = f'<p class="empty">{"No task matches." if asked.chosen else "No tasks yet."}</p>'
    else:
        rows = "".join(
            f'<tr data-task="{escape(r.id)}" data-state="{escape(r.state.value)}">'
            f'<td><a href="/console/tasks/{escape(r.id)}">{escape(_shown(r))}</a></td>'
            f"<td>{escape(r.spec.agent)}</td><td>{escape(r.spec.type)}</td>"
            f'<td class="state">{escape(r.state.value)}</td><td class="n">{_iterations(r)}</td>'
            f"{usage_cells(r.usage)}<td>unknown</td><td>{when(r.created_at)}</td>"
            f"<td>{when(r.updated_at)}</td></tr>"
            for r in records
        )
        table = (
            '<table id="tasks"><thead><tr><th>task</th><th>agent</th><th>type</th><th>state</th>'
            f'<th class="n">iterations</th>{USAGE_HEAD}<th>cost</th><th>created</th>'
            f"<th>updated</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    pager = asked.pager(cursor=cursor, shown=len(records))
    return page("tasks", f'<h1>Tasks</h1>{asked.form()}<div data-refresh="5">{table}{pager}</div>')


def task_page(record: TaskRecord, *, work: str = "") -> str:
    """The task's page; ``work`` (already escaped HTML: its timeline, a link to its trace)
    goes below its figures."""
    if record.result is not None:
        outcome = (
            '<h2>Result</h2><pre id="result">'
            f"{escape(json.dumps(record.result, indent=2, ensure_ascii=False))}</pre>"
        )
    elif record.reason:
        outcome = f'<h2>Reason</h2><p id="reason">{escape(record.reason)}</p>'
    else:
        outcome = ""
    live = (
        ""
        if record.final
        else (
            '<h2>Progress</h2><ol id="progress" '
            f'data-events="/v1/tasks/{escape(record.id)}/notifications" '
            f'data-names="{_NAMES}"></ol>'
        )
    )
    body = (
        f"<h1>Task {escape(_shown(record))}</h1>"
        + (f'<p class="muted">id {escape(record.id)}</p>' if record.spec.name else "")
        + f'<p><span id="state" data-state="{escape(record.state.value)}">'
        f"{escape(record.state.value)}</span> · {escape(record.spec.agent)} · "
        f"{escape(record.spec.type)} · instance {escape(record.instance or '-')}</p>"
        f'<p class="muted" id="times">created {when(record.created_at)} by '
        f"{escape(record.created_by)} · updated {when(record.updated_at)}</p>"
        # While it works, the figures are fetched again from the server's record (updated at
        # every iteration's completion), not left as they were when the page opened.
        f'<div data-refresh="{2 if not record.final else 60}"><h2>Iterations</h2>'
        f"{budget_bar(record.iterations_used, record.budget, title='iterations used of budget')}"
        f'<h2>Tokens</h2><table id="task-usage"><thead><tr>{USAGE_HEAD}<th>cost</th></tr>'
        f"</thead><tbody><tr>{usage_cells(record.usage)}<td>unknown</td></tr></tbody></table>"
        f"</div>{outcome}{live}{work}"
        f'<p><a href="/console/sessions/{escape(record.session)}">what was done (its session)</a>'
        "</p>"
        f'<h2>Instructions</h2><div class="msg">{escape(record.spec.instructions)}</div>'
    )
    return page(f"task {_shown(record)}", body)
