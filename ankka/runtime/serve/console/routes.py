"""The console's routes, mounted by :func:`ankka.runtime.serve.http.create_app` when enabled.

Reads only through the runtime's own read API (:meth:`Runtime.messages`,
:meth:`Runtime.summary`, the journal's session list; :meth:`TaskHost.get` and
:meth:`TaskHost.recent` for tasks), renders with :mod:`.pages` and :mod:`.tasks_pages`. Access:
callers on this machine (loopback), and elsewhere only a caller the runtime identified (a client
certificate with ``--tls-dir`` or a token with ``--token-file``, as for the API); every page
follows the session policy (:mod:`ankka.runtime.declare.policy`): a caller sees the sessions, tasks
and
approvals it may read and decides those it may decide. Anyone else, including every caller of a
runtime run with ``--trust-network`` off loopback, is answered 403.
"""

from __future__ import annotations

from html import escape
from importlib import resources

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from ankka._kernel.errors import NotFound
from ankka.runtime.declare.policy import NotPermitted
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.drivers.tasks.host import TaskHost
from ankka.runtime.records.approvals import ApprovalDecided
from ankka.runtime.records.tasks import TaskRecord
from ankka.runtime.serve.console.access import console_caller, is_loopback
from ankka.runtime.serve.console.approvals import (
    approvals_page,
    approvals_table,
    decide_from_form,
    decisions_section,
    pending,
)
from ankka.runtime.serve.console.pages import not_found, page, session_page, sessions_page
from ankka.runtime.serve.console.tasks_pages import task_page, tasks_page
from ankka.runtime.serve.console.views import session_view

__all__ = ["MAX_SESSIONS", "console_routes", "is_loopback"]

MAX_SESSIONS = 200  # the list shows the last ones; a session's own page is always reachable
MAX_SCANNED = 2000  # the most recent sessions looked at for the ones the caller may read
MAX_TASKS = 200
_SCRIPT = resources.files("ankka.runtime.serve.console").joinpath("static/console.js").read_bytes()
_HEADERS = {
    # Nothing but this server: the page works offline and sends nothing elsewhere.
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'",
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


def console_routes(runtime: Runtime, tasks: TaskHost | None = None) -> list[BaseRoute]:
    policy = runtime.policy

    async def sessions(request: Request) -> Response:
        if (caller := console_caller(request)) is None:
            return _refused()
        names = await runtime.context.journal.sessions()
        readable = []
        for name in reversed(names[-MAX_SCANNED:]):
            try:
                readable.append(await runtime.summary(name, caller=caller))
            except NotPermitted:
                continue
            if len(readable) == MAX_SESSIONS:
                break
        more = len(readable) == MAX_SESSIONS or len(names) > MAX_SCANNED
        return HTMLResponse(sessions_page(readable, more=more), headers=_HEADERS)

    async def session(request: Request) -> Response:
        if (caller := console_caller(request)) is None:
            return _refused()
        name = request.path_params["session"]
        try:
            messages = await runtime.messages(name, caller=caller)
        except NotPermitted as exc:
            return _not_permitted(exc)
        summary = await runtime.summary(name, caller=caller)
        decided = [
            e.record
            for e in await runtime.context.journal.read(name)
            if isinstance(e.record, ApprovalDecided)
        ]
        if not messages and not summary.awaiting and not decided:
            missing = not_found(f"No session {name!r} has any message.")
            return HTMLResponse(missing, status_code=404, headers=_HEADERS)
        view = session_view(
            name,
            messages,
            summary,
            as_sent=await runtime.messages(name, as_sent=True, caller=caller),
        )
        waiting = [r for r in await pending(runtime, caller) if r.get("session") == name]
        extra = decisions_section(decided, confirm=request.query_params.get("decided")) + (
            "<h2>Waiting for a decision</h2>" + approvals_table(waiting) if waiting else ""
        )
        return HTMLResponse(session_page(view, extra=extra), headers=_HEADERS)

    def readable(caller: str, record: TaskRecord) -> bool:
        return policy.allows(caller, "read", creator=record.created_by, agent=record.spec.agent)

    async def task_list(request: Request) -> Response:
        if (caller := console_caller(request)) is None:
            return _refused()
        records = await tasks.recent(MAX_TASKS) if tasks is not None else []
        shown = [r for r in records if readable(caller, r)]
        return HTMLResponse(tasks_page(shown, limit=MAX_TASKS), headers=_HEADERS)

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
        return HTMLResponse(task_page(record), headers=_HEADERS)

    async def approvals(request: Request) -> Response:
        if (caller := console_caller(request)) is None:
            return _refused()
        return HTMLResponse(approvals_page(await pending(runtime, caller)), headers=_HEADERS)

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
        Route("/console/approvals", approvals, methods=["GET"]),
        Route("/console/approvals/{approval}", decision, methods=["POST"]),
        Route("/console/static/console.js", script, methods=["GET"]),
    ]
