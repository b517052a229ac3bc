"""The console's routes, mounted by :func:`ankka.runtime.http.create_app` when enabled.

Reads only through the runtime's own read API (:meth:`Runtime.messages`,
:meth:`Runtime.summary`, the journal's session list; :meth:`TaskHost.get` and
:meth:`TaskHost.recent` for tasks), renders with :mod:`.pages` and :mod:`.tasks_pages`. Access:
callers on this machine (loopback), and elsewhere only a caller the runtime identified (a client
certificate with ``--tls-dir`` or a token with ``--token-file``, as for the API) whose identity
is the platform's (``ankka://platform/...``): the console shows every session, which the
session policy allows the platform only. Anyone else, including every caller of a runtime run
with ``--trust-network``, is answered 403.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from ankka._kernel.errors import NotFound
from ankka.runtime.console.access import console_caller, is_loopback
from ankka.runtime.console.approvals import approvals_page, decide_from_form, pending
from ankka.runtime.console.pages import not_found, session_page, sessions_page
from ankka.runtime.console.tasks_pages import task_page, tasks_page
from ankka.runtime.console.views import session_view
from ankka.runtime.host import Runtime
from ankka.runtime.tasks.host import TaskHost

__all__ = ["MAX_SESSIONS", "console_routes", "is_loopback"]

MAX_SESSIONS = 200  # the list shows the last ones; a session's own page is always reachable
MAX_TASKS = 200
_SCRIPT = resources.files("ankka.runtime.console").joinpath("static/console.js").read_bytes()
_HEADERS = {
    # Nothing but this server: the page works offline and sends nothing elsewhere.
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'",
    "Cache-Control": "no-store",
}


def _refused(request: Request) -> Response | None:
    if console_caller(request) is not None:
        return None
    return HTMLResponse(
        "<!doctype html><title>refused</title><p>The ankka console answers callers on this "
        "machine (loopback), and elsewhere a platform identity (ankka://platform/...) given by "
        "a client certificate or token the runtime checks (--tls-dir, --token-file).</p>",
        status_code=403,
        headers=_HEADERS,
    )


def console_routes(runtime: Runtime, tasks: TaskHost | None = None) -> list[BaseRoute]:
    async def sessions(request: Request) -> Response:
        if (refused := _refused(request)) is not None:
            return refused
        names = await runtime.journal.sessions()
        shown = names[-MAX_SESSIONS:]
        rows = [await runtime.summary(name) for name in reversed(shown)]
        return HTMLResponse(sessions_page(rows, shown_of=len(names)), headers=_HEADERS)

    async def session(request: Request) -> Response:
        if (refused := _refused(request)) is not None:
            return refused
        name = request.path_params["session"]
        messages = await runtime.messages(name)
        if not messages:
            page = not_found(f"No session {name!r} has any message.")
            return HTMLResponse(page, status_code=404, headers=_HEADERS)
        view = session_view(
            name,
            messages,
            await runtime.summary(name),
            as_sent=await runtime.messages(name, as_sent=True),
        )
        return HTMLResponse(session_page(view), headers=_HEADERS)

    async def task_list(request: Request) -> Response:
        if (refused := _refused(request)) is not None:
            return refused
        records = await tasks.recent(MAX_TASKS) if tasks is not None else []
        return HTMLResponse(tasks_page(records, limit=MAX_TASKS), headers=_HEADERS)

    async def task(request: Request) -> Response:
        if (refused := _refused(request)) is not None:
            return refused
        name = request.path_params["task"]
        if tasks is None:
            return HTMLResponse(not_found("This runtime runs no tasks."), 404, headers=_HEADERS)
        try:
            record = await tasks.get(name)
        except NotFound:
            page = not_found(f"There is no task {name!r}.")
            return HTMLResponse(page, status_code=404, headers=_HEADERS)
        return HTMLResponse(task_page(record), headers=_HEADERS)

    async def approvals(request: Request) -> Response:
        if (refused := _refused(request)) is not None:
            return refused
        return HTMLResponse(approvals_page(await pending(runtime)), headers=_HEADERS)

    async def decision(request: Request) -> Response:
        if (refused := _refused(request)) is not None:
            return refused
        return await decide_from_form(runtime, request, _HEADERS)

    async def script(request: Request) -> Response:
        if (refused := _refused(request)) is not None:
            return refused
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
