"""The runtime's MCP routes: the OAuth callback and the console's MCP page.

- ``GET /v1/mcp/oauth/callback?code&state[&iss]`` (or ``?error&state``): where an authorization
  server sends a person back after consenting (``ANKKA_MCP_<SERVER>_OAUTH=consent``). The
  ``state`` names the one consent it answers (:class:`~.consent.ConsentDesk`); it is answered at
  most once: a second visit, or an unknown state, is 404. The page says what happens next.
- ``GET /console/mcp`` (with ``--console on``): every server with its state, and a link for each
  consent that waits for a person.

Mounted by :func:`ankka.runtime.serve.http.create_app` on every runtime. The console page is
answered to console callers only
(:func:`~ankka.runtime.serve.console.access.console_caller`).
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Annotated

from fastapi import Query
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from ankka._kernel.errors import NotFound
from ankka.runtime.declare.mcp import CALLBACK_PATH
from ankka.runtime.serve.api import ApiRoute
from ankka.runtime.serve.console.access import console_caller

if TYPE_CHECKING:  # the MCP SDK is an extra: a runtime without MCP servers never imports it
    from ankka.runtime.features.mcp.servers import McpServers

__all__ = ["mcp_routes"]

_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'"
    ),
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",  # the callback's URL carries the code
}
MAX_PARAM = 4096
_HTML = {"content": {"text/html": {"schema": {"type": "string"}}}}
State = Annotated[str, Query(description="the consent this answers")]
Code = Annotated[str | None, Query(description="the authorization code")]
Iss = Annotated[str | None, Query(description="the authorization server (RFC 9207)")]
Refusal = Annotated[str | None, Query(description="the authorization server's refusal")]


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    html = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}'
        f" · ankka</title></head><body>{body}</body></html>"
    )
    return HTMLResponse(html, status_code=status, headers=_HEADERS)


def mcp_routes(servers: McpServers | None, *, console: bool) -> list[BaseRoute]:
    """The routes; mounted on every runtime (one without MCP servers answers that it has
    none), so the API is the same whatever the agents list."""

    async def callback(
        state: State = "", code: Code = None, iss: Iss = None, error: Refusal = None
    ) -> Response:
        if servers is None:
            return _page("not found", "<p>This runtime lists no MCP server.</p>", 404)
        if not state or any(len(v or "") > MAX_PARAM for v in (state, code, error, iss)):
            return _page("refused", "<p>This is no authorization server's answer.</p>", 400)
        try:
            server = servers.consent.complete(state=state, code=code, iss=iss, error=error)
        except NotFound as exc:
            return _page("not found", f"<p>{escape(str(exc))}.</p>", 404)
        if error is not None:
            said = f"The authorization server refused ({escape(error[:100])})."
            return _page("refused", f"<h1>{escape(server)}</h1><p>{said}</p>", 200)
        return _page(
            "consented",
            f"<h1>{escape(server)}</h1><p>Thank you: the runtime is getting its token now. "
            'Its tools join the next turn. <a href="/console/mcp">Back to the console</a>.</p>',
        )

    async def page(request: Request) -> Response:
        if console_caller(request) is None:
            return _page("refused", "<p>The console answers identified callers only.</p>", 403)
        if servers is None:
            return _page("MCP servers", "<h1>MCP servers</h1><p>This runtime lists none.</p>")
        rows = []
        missing = servers.missing()
        waiting = {p.server: p for p in servers.consent.pending()}
        for name, connection in servers.connections.items():
            if name in waiting:
                state = (
                    f'<a href="{escape(waiting[name].url)}" rel="noreferrer">consent at the '
                    "authorization server</a>"
                )
            elif name in missing:
                state = f"down: {escape(missing[name])}"
            else:
                state = f"connected (protocol {escape(connection.protocol or '?')})"
            rows.append(f"<tr><td>{escape(name)}</td><td>{state}</td></tr>")
        table = "<table><tr><th>server</th><th>state</th></tr>" + "".join(rows) + "</table>"
        return _page("MCP servers", f"<h1>MCP servers</h1>{table}")

    routes: list[BaseRoute] = [
        ApiRoute(
            CALLBACK_PATH,
            callback,
            methods=["GET"],
            operation_id="mcp_oauth_callback",
            summary="Where an authorization server sends a person back after consenting for an "
            "MCP server",
            response_class=HTMLResponse,
            response_description="a page for the person",
            responses={
                400: {"description": "no authorization server's answer", **_HTML},
                404: {"description": "no such consent (or answered already)", **_HTML},
            },
        )
    ]
    if console:
        routes.append(Route("/console/mcp", page, methods=["GET"]))
    return routes
