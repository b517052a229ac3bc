"""The A2A routes of a runtime's agents, built over its :class:`~.service.A2AService` at the
first A2A request (:mod:`.mount`): this module is the one that imports the a2a-sdk's server
(its bindings, FastAPI's routing with them, its request handlers with SQLAlchemy and httpx).

Per agent, at base URL ``/a2a/{agent}``: its card, the JSON-RPC binding (``POST {base}``) and
the HTTP+JSON binding (``{base}/message:send``, ``{base}/tasks/{id}``, ...), the SDK's own
(``a2a.server.routes``) over :class:`~.handler.AnkkaRequestHandler`; and the host root's card
(``GET /.well-known/agent-card.json``) for the service's one agent or ``--a2a-default``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import (
    agent_card_to_dict,
    build_error_response,
)
from a2a.server.routes import (
    DefaultServerCallContextBuilder,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.types import a2a_pb2 as pb
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import InvalidParamsError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ankka.runtime.serve.a2a.card import agent_card, base_url
from ankka.runtime.serve.a2a.handler import AnkkaRequestHandler
from ankka.runtime.serve.a2a.mount import CARD_PATH
from ankka.runtime.serve.identity import caller_of

if TYPE_CHECKING:
    from ankka.runtime.serve.a2a.port import AgentInfo
    from ankka.runtime.serve.a2a.service import A2AService

__all__ = ["a2a_routes"]


class _Context(DefaultServerCallContextBuilder):
    """The SDK's call context, with the agent the route names and the caller ankka named."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state.pop("auth", None)
        context.state["agent"] = request.path_params.get("agent", "")
        context.state["caller"] = caller_of(request.scope)
        return context


def a2a_routes(service: A2AService) -> list[BaseRoute]:
    """Every A2A route of ``service``'s agents (the SDK's bindings checked in front)."""
    handler = AnkkaRequestHandler(
        service.port, service.index, service.turns, service.tasks, service.push
    )
    agents = service.agents
    builder = _Context()

    def card_of(request: Request, agent: str) -> Response:
        info = agents.get(agent)
        if info is None:
            return _no_agent(agent, agents)
        settings = service.settings
        host = request.headers.get("host")
        base = base_url(settings, scheme=request.url.scheme, host=host, agent=agent)
        return JSONResponse(agent_card_to_dict(agent_card(info, settings, base)))

    async def card(request: Request) -> Response:
        return card_of(request, request.path_params["agent"])

    async def root_card(request: Request) -> Response:
        if service.root_agent is None:
            names = ", ".join(f"/a2a/{n}{CARD_PATH}" for n in sorted(agents))
            body = {
                "error": {
                    "type": "not_found",
                    "message": "this runtime serves several agents, each with its own "
                    f"card: {names} (ankka serve --a2a-default AGENT serves one here)",
                }
            }
            return JSONResponse(body, status_code=404)
        return card_of(request, service.root_agent)

    def known(
        endpoint: Callable[[Request], Awaitable[Response]], path: str
    ) -> Callable[..., object]:
        template = SimpleNamespace(path=path)  # the route a server span is named by

        async def checked(request: Request) -> Response:
            request.scope["route"] = template
            agent = request.path_params.get("agent", "")
            if agent not in agents:
                return _no_agent(agent, agents)
            refusal = await _bad_status(request)
            if refusal is not None:
                return refusal
            return await endpoint(request)

        return checked

    rpc = create_jsonrpc_routes(handler, "/a2a/{agent}", context_builder=builder)
    rest = create_rest_routes(handler, context_builder=builder, path_prefix="/a2a/{agent}")
    routes: list[BaseRoute] = [
        Route(f"/a2a/{{agent}}{CARD_PATH}", card, methods=["GET"]),
        Route(CARD_PATH, root_card, methods=["GET"]),
    ]
    for route in (*rpc, *rest):
        # The SDK also mounts its routes under /{tenant}: ankka has no tenants, and a mount
        # at the root would shadow every other route.
        if isinstance(route, Route):
            routes.append(
                Route(
                    route.path,
                    known(route.endpoint, route.path),
                    methods=sorted(route.methods or ()),
                )
            )
    return routes


_STATE_NAMES = frozenset(pb.TaskState.keys())


async def _bad_status(request: Request) -> Response | None:
    """ListTasks with a ``status`` that is no task state is refused, naming it (the SDK's
    parser reads an unknown enum value as "unspecified", which would list every task)."""
    if request.method == "GET" and request.url.path.endswith("/tasks"):
        given = request.query_params.get("status")
        if given is not None and given not in _STATE_NAMES:
            problem = InvalidParamsError(message=f"status {given[:60]!r} is not a TaskState")
            return JSONResponse(build_rest_error_payload(problem), status_code=400)
        return None
    if request.method != "POST" or request.url.path.count("/") != 2:
        return None
    try:
        body = await request.json()
    except ValueError:
        return None  # the binding answers a parse error
    if not isinstance(body, dict) or body.get("method") != "ListTasks":
        return None
    params = body.get("params")
    given = params.get("status") if isinstance(params, dict) else None
    if given is None or given in _STATE_NAMES or isinstance(given, int):
        return None
    problem = InvalidParamsError(message=f"status {str(given)[:60]!r} is not a TaskState")
    return JSONResponse(build_error_response(body.get("id"), problem))


def _no_agent(agent: str, agents: Mapping[str, AgentInfo]) -> Response:
    names = ", ".join(sorted(agents))
    body = {
        "error": {
            "type": "not_found",
            "message": f"there is no agent {agent[:100]!r} (agents: {names or 'none'})",
        }
    }
    return JSONResponse(body, status_code=404)
