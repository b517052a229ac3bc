"""The console's routes, mounted by :func:`ankka.runtime.serve.http.create_app` when enabled.

Reads only through the runtime's own read API (:meth:`Runtime.messages`,
:meth:`Runtime.summary`, the journal's session list; :meth:`TaskHost.get` and
:meth:`TaskHost.recent` for tasks, each child of a task as :meth:`TaskHost.get` reads it, or
its tree row when another runtime works it; :meth:`TeamHost.items` for a backlog), renders
with :mod:`.pages`, :mod:`.tasks_pages`, :mod:`.tree` and :mod:`.teams_pages`. Access:
callers on this machine (loopback), and elsewhere only a caller the runtime identified (a client
certificate with ``--tls-dir`` or a token with ``--token-file``, as for the API); every page
follows the session policy (:mod:`ankka.runtime.declare.policy`): a caller sees the sessions, tasks
and approvals it may read and decides those it may decide. Each list is read through a store
query whose condition is the caller's read right (:mod:`ankka.runtime.store.readable`), so no
other caller's volume crowds one's own rows out of a page (issue 31, item 3). Anyone else,
including every caller of a runtime run with ``--trust-network`` off loopback, is answered 403.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from functools import partial
from html import escape
from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from ankka._kernel.errors import NotFound
from ankka.runtime.declare.policy import NotPermitted
from ankka.runtime.drivers.request import Runtime, SessionSummary
from ankka.runtime.drivers.tasks.host import TaskHost
from ankka.runtime.drivers.teams.backlog import TeamHost
from ankka.runtime.records.approvals import ApprovalDecided
from ankka.runtime.records.registry import Entry
from ankka.runtime.records.tasks import CONVERSATION_SESSION_PREFIX, TaskRecord, TaskState
from ankka.runtime.serve.console.access import console_caller, is_loopback
from ankka.runtime.serve.console.approvals import (
    STATES,
    approvals_answer,
    approvals_table,
    decide_from_form,
    decisions_section,
    pending,
)
from ankka.runtime.serve.console.csrf import form_token, keep_token
from ankka.runtime.serve.console.listing import PER_PAGE, BadQuery, Filter, Listing, listing
from ankka.runtime.serve.console.pages import not_found, page, session_page, sessions_page
from ankka.runtime.serve.console.tasks_pages import task_page, tasks_page
from ankka.runtime.serve.console.teams_pages import (
    backlog_page,
    conversation_section,
    teams_page,
)
from ankka.runtime.serve.console.tree import (
    Parent,
    RemoteChild,
    remote_child,
    subtree,
    tree_section,
)
from ankka.runtime.serve.console.views import session_view
from ankka.runtime.serve.console.waterfall import trace_link, waterfall
from ankka.runtime.store import remote_statements, trace_statements, tree_statements
from ankka.runtime.store.approval_index import cursor_of
from ankka.runtime.store.readable import Cursor, encode_cursor, readers

__all__ = ["MAX_SCANNED", "TRACE_UI_VARIABLE", "console_routes", "is_loopback"]

TRACE_UI_VARIABLE = "ANKKA_TRACE_UI_URL"
"""The collector's UI (e.g. Jaeger's, ``http://jaeger:16686``): a task's page links its trace
there (``{trace_id}`` in it is replaced, else ``/trace/<id>`` is appended)."""

MAX_SCANNED = 2000  # the most readable sessions one session list looks at (its filters)
_CHUNK = 200  # sessions read from the store at once
_SCRIPT = resources.files("ankka.runtime.serve.console").joinpath("static/console.js").read_bytes()
_HEADERS = {
    # Nothing but this server: the page works offline and sends nothing elsewhere.
    "Content-Security-Policy": (
        "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'"
    ),
    "Cache-Control": "no-store",
}


_REFUSED = (
    "<!doctype html><title>refused</title><p>The ankka console answers callers on this machine "
    "(loopback), and elsewhere a caller identified by a client certificate or token the runtime "
    "checks (--tls-dir, --token-file).</p>"
)


def _refused(message: str = _REFUSED) -> Response:
    return HTMLResponse(message, status_code=403, headers=_HEADERS)


def _not_permitted(exc: NotPermitted) -> Response:
    return _refused(page("refused", f"<h1>Refused</h1><p>{escape(str(exc))}</p>"))


def _bad(exc: BadQuery) -> Response:
    body = page("not understood", f'<h1>Not understood</h1><p id="problem">{escape(str(exc))}</p>')
    return HTMLResponse(body, status_code=400, headers=_HEADERS)


def _turn_times(entries: list[Entry]) -> Mapping[str, datetime]:
    """When each turn of a session began: its first record's time."""
    times: dict[str, datetime] = {}
    for entry in entries:
        turn = getattr(entry.record, "turn", None)
        if isinstance(turn, str) and turn and turn not in times:
            times[turn] = entry.at
    return times


def _task_key(record: TaskRecord) -> Cursor:
    """Where the tasks page after ``record`` starts: its creation time (as stored) and id."""
    assert record.created_at is not None  # every stored task has one
    return (record.created_at.isoformat(), record.id)


def console_routes(
    runtime: Runtime,
    tasks: TaskHost | None = None,
    *,
    trace_ui: str | None = None,
    teams: TeamHost | None = None,
) -> list[BaseRoute]:
    """``trace_ui``: the collector's UI (default: ``$ANKKA_TRACE_UI_URL``; empty: no link);
    ``teams``: the team host whose backlogs the team pages show."""
    if trace_ui is None:
        trace_ui = os.environ.get(TRACE_UI_VARIABLE, "").strip()
    policy = runtime.policy
    service = runtime.service
    agents = tuple(sorted((*service.agents, *service.autonomous_agents)))
    workers = tuple(sorted(service.autonomous_agents))
    types = tuple(
        sorted({x.task_type.name for a in service.autonomous_agents.values() for x in a.accepts})
    )
    session_filters = (Filter("agent", "agent", agents), Filter("state", "state", ("waiting",)))
    task_filters = (
        Filter("state", "state", tuple(s.value for s in TaskState)),
        Filter("agent", "agent", workers),
        Filter("type", "type", types),
    )
    approval_filters = (Filter("state", "state", STATES), Filter("agent", "agent", agents))

    async def sessions(request: Request) -> Response:
        if (caller := console_caller(request)) is None:
            return _refused()
        try:
            asked = listing("/console", request.query_params, session_filters)
        except BadQuery as exc:
            return _bad(exc)
        rows, cursor, scanned = await readable_summaries(caller, asked)
        body = sessions_page(rows, asked, cursor=cursor, scanned=scanned)
        return HTMLResponse(body, headers=_HEADERS)

    async def readable_summaries(
        caller: str, asked: Listing
    ) -> tuple[list[SessionSummary], str | None, bool]:
        """One page of summaries of the sessions the caller may read that pass ``asked``'s
        filters, most recently active first from its cursor on, walked through the store's
        cursor (only the caller's readable sessions are read: issue 31, item 3); the next
        page's cursor; and whether the walk stopped at :data:`MAX_SCANNED` sessions (the
        cursor then goes on from the last one looked at)."""
        agent, state = asked.chosen.get("agent"), asked.chosen.get("state")
        who = readers(policy, caller)
        journal = runtime.context.journal
        passing: list[tuple[Cursor, SessionSummary]] = []
        after, looked = asked.after, 0
        while looked < MAX_SCANNED:
            # Unfiltered, one page and one more is all there is to read.
            size = min(PER_PAGE + 1 if not asked.chosen else _CHUNK, MAX_SCANNED - looked)
            keys = await journal.readable(who, after=after, limit=size)
            for key in keys:
                try:
                    summary = await runtime.summary(key[1], caller=caller)
                except NotPermitted:
                    continue
                if agent is not None and agent not in summary.agents:
                    continue
                if state == "waiting" and not summary.awaiting:
                    continue
                passing.append((key, summary))
                if len(passing) > PER_PAGE:
                    return [s for _, s in passing[:PER_PAGE]], encode_cursor(passing[-2][0]), False
            if len(keys) < size:
                return [s for _, s in passing], None, False
            looked += len(keys)
            after = keys[-1]
        assert after is not None  # MAX_SCANNED > 0 sessions were looked at
        return [s for _, s in passing], encode_cursor(after), True

    async def session(request: Request) -> Response:
        if (caller := console_caller(request)) is None:
            return _refused()
        name = request.path_params["session"]
        try:
            messages = await runtime.messages(name, caller=caller)
        except NotPermitted as exc:
            return _not_permitted(exc)
        summary = await runtime.summary(name, caller=caller)
        entries = await runtime.context.journal.read(name)
        decided = [e.record for e in entries if isinstance(e.record, ApprovalDecided)]
        if not messages and not summary.awaiting and not decided:
            missing = not_found(f"No session {name!r} has any message.")
            return HTMLResponse(missing, status_code=404, headers=_HEADERS)
        view = session_view(
            name,
            messages,
            summary,
            as_sent=await runtime.messages(name, as_sent=True, caller=caller),
            times=_turn_times(entries),
        )
        waiting = await pending(runtime, caller, session=name)
        token = form_token(request)
        spoken = (
            conversation_section(entries) if name.startswith(CONVERSATION_SESSION_PREFIX) else ""
        )
        extra = (
            spoken
            + decisions_section(decided, confirm=request.query_params.get("decided"))
            + (
                "<h2>Waiting for a decision</h2>" + approvals_table(waiting, token=token)
                if waiting
                else ""
            )
        )
        return keep_token(HTMLResponse(session_page(view, extra=extra), headers=_HEADERS), token)

    def readable(caller: str, record: TaskRecord) -> bool:
        return policy.allows(caller, "read", creator=record.created_by, agent=record.spec.agent)

    async def task_list(request: Request) -> Response:
        if (caller := console_caller(request)) is None:
            return _refused()
        try:
            asked = listing("/console/tasks", request.query_params, task_filters)
        except BadQuery as exc:
            return _bad(exc)
        records = (  # the filters are the table's columns: state, agent, type
            await tasks.recent(
                PER_PAGE + 1,
                who=readers(policy, caller),
                after=asked.after,
                matching=asked.chosen,
            )
            if tasks is not None
            else []
        )
        rows, cursor = asked.cut(records, _task_key)
        return HTMLResponse(tasks_page(rows, asked, cursor=cursor), headers=_HEADERS)

    async def task(request: Request) -> Response:
        if (caller := console_caller(request)) is None:
            return _refused()
        name = request.path_params["task"]
        if tasks is None:
            return HTMLResponse(not_found("This runtime runs no tasks."), 404, headers=_HEADERS)
        try:
            record = await tasks.get(name)
        except NotFound:
            missing = not_found(f"There is no task {name!r}.")
            return HTMLResponse(missing, status_code=404, headers=_HEADERS)
        if not readable(caller, record):
            return _not_permitted(NotPermitted(f"caller {caller!r} may not read task {name!r}"))
        entries = await runtime.context.journal.read(record.session)
        work = await tree_of(caller, record) + f"<h2>Timeline</h2>{waterfall(entries)}"
        if trace_ui:
            carrier = await tasks.store.read(lambda tx: trace_statements.get(tx, record.id))
            work = trace_link(trace_ui, carrier) + work
        return HTMLResponse(task_page(record, work=work), headers=_HEADERS)

    async def read_child(child: str) -> TaskRecord | RemoteChild | None:
        """A child as the API reads it (its record), else its tree row when another runtime
        works it, else None."""
        assert tasks is not None
        try:
            return await tasks.get(child)
        except NotFound:
            pass

        def remote(tx: Any) -> RemoteChild | None:
            row = tree_statements.row(tx, child)
            if row is None or row.remote is None:
                return None
            return remote_child(row, remote_statements.shown(tx, child))

        found: RemoteChild | None = await tasks.store.read(remote)
        return found

    async def tree_of(caller: str, record: TaskRecord) -> str:
        """The task's tree section: its parent (a link when it is a task here) and its
        descendants, read as ``GET /v1/tasks/{task}`` reads each (bounded: :mod:`.tree`)."""
        assert tasks is not None and record.tree is not None  # tasks.get gives its place
        parent = None
        if record.tree.parent is not None:
            here = isinstance(await read_child(record.tree.parent), TaskRecord)
            parent = Parent(record.tree.parent, here)
        children, more = await subtree(record, read_child, readable=partial(readable, caller))
        return tree_section(parent, children, more, record.tree.tree_usage)

    async def team_list(request: Request) -> Response:
        if (caller := console_caller(request)) is None:
            return _refused()
        declared = sorted(service.teams.values(), key=lambda t: t.name) if teams else []
        shown = [(t, await teams.items(t.name, by=caller)) for t in declared if teams]
        conversations = sorted(service.conversations.values(), key=lambda c: c.name)
        return HTMLResponse(teams_page(shown, conversations), headers=_HEADERS)

    async def team(request: Request) -> Response:
        if (caller := console_caller(request)) is None:
            return _refused()
        name = request.path_params["team"]
        declared = service.teams.get(name)
        if teams is None or declared is None:
            missing = not_found(f"This service declares no team {name!r}.")
            return HTMLResponse(missing, status_code=404, headers=_HEADERS)
        items = await teams.items(name, by=caller)  # those the caller may read, as the API
        body = backlog_page(declared, items, now=teams.clock.now())
        return HTMLResponse(body, headers=_HEADERS)

    async def approvals(request: Request) -> Response:
        if (caller := console_caller(request)) is None:
            return _refused()
        query = dict(request.query_params)
        query.setdefault("state", "pending")  # the form's "any" sends state= (every state)
        try:
            asked = listing("/console/approvals", query, approval_filters)
        except BadQuery as exc:
            return _bad(exc)
        shown, cursor = await listed(asked, caller)
        return approvals_answer(request, shown, _HEADERS, asked, cursor=cursor)

    async def listed(asked: Listing, caller: str) -> tuple[list[dict[str, object]], str | None]:
        """One page of the approvals the caller may read, newest first from ``asked``'s
        cursor on, and the next page's cursor (from the index's rows: a row whose request
        was never recorded is left out of the page, not of the paging)."""
        desk = runtime.approvals
        if desk.index is None:
            return [], None
        found = await desk.index.find(
            agent=asked.chosen.get("agent"),
            state=asked.chosen.get("state"),
            limit=PER_PAGE + 1,
            who=readers(policy, caller),
            after=asked.after,
            newest=True,
        )
        rows, cursor = asked.cut(found, cursor_of)
        return await runtime.questions.listed(rows, caller), cursor

    async def decision(request: Request) -> Response:
        if (caller := console_caller(request)) is None:
            return _refused()
        return await decide_from_form(runtime, request, caller, _HEADERS)

    async def script(request: Request) -> Response:
        if console_caller(request) is None:
            return _refused()
        return Response(_SCRIPT, media_type="text/javascript", headers=_HEADERS)

    return [
        Route("/console", sessions, methods=["GET"]),
        Route("/console/sessions/{session}", session, methods=["GET"]),
        Route("/console/tasks", task_list, methods=["GET"]),
        Route("/console/tasks/{task}", task, methods=["GET"]),
        Route("/console/teams", team_list, methods=["GET"]),
        Route("/console/teams/{team}", team, methods=["GET"]),
        Route("/console/approvals", approvals, methods=["GET"]),
        Route("/console/approvals/{approval}", decision, methods=["POST"]),
        Route("/console/static/console.js", script, methods=["GET"]),
    ]
