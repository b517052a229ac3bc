"""A2A in ``ankka serve``: the routes, and what they need while the server runs.

Per agent, at base URL ``/a2a/{agent}``:

- ``GET {base}/.well-known/agent-card.json``: its card (:mod:`.card`);
- ``POST {base}``: the JSON-RPC binding (``SendMessage``, ``SendStreamingMessage``,
  ``GetTask``, ``ListTasks``, ``CancelTask``, ``SubscribeToTask``, the push config methods);
- ``{base}/message:send``, ``{base}/tasks/{id}``, ...: the HTTP+JSON binding.

And ``GET /.well-known/agent-card.json``, the host root where generic clients look first, for a
service with one agent (or the one ``ankka serve --a2a-default`` names). The bindings are the
SDK's own (``a2a.server.routes``), over :class:`~.handler.AnkkaRequestHandler`; they check the
``A2A-Version`` service parameter (1.x; none means 0.3, which is refused with
VersionNotSupportedError). The identity layer in front of every route names the caller, as for
the runtime's own API.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from types import SimpleNamespace

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

from ankka._kernel.clock import Clock, SystemClock
from ankka.runtime.serve.a2a.card import CardSettings, agent_card, base_url
from ankka.runtime.serve.a2a.handler import AnkkaRequestHandler
from ankka.runtime.serve.a2a.index import A2AIndex
from ankka.runtime.serve.a2a.port import RuntimePort
from ankka.runtime.serve.a2a.push import PushDesk
from ankka.runtime.serve.a2a.tasks import Tasks
from ankka.runtime.serve.a2a.turns import Turns
from ankka.runtime.serve.a2a.wire import TaskView
from ankka.runtime.serve.identity import caller_of

__all__ = ["A2AService"]

CARD_PATH = "/.well-known/agent-card.json"
STALE_SECONDS = 300.0  # on a shared store, another process's unfinished claim is left this long


class _Context(DefaultServerCallContextBuilder):
    """The SDK's call context, with the agent the route names and the caller ankka named."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state.pop("auth", None)
        context.state["agent"] = request.path_params.get("agent", "")
        context.state["caller"] = caller_of(request.scope)
        return context


class A2AService:
    """The A2A layer of one runtime: an async context manager (it owns the push loop and the
    turns in flight) with the routes to mount."""

    def __init__(
        self,
        port: RuntimePort,
        *,
        settings: CardSettings | None = None,
        default_agent: str | None = None,
        allow_private_webhooks: bool = False,
        clock: Clock | None = None,
    ) -> None:
        if port.tasks is None:
            raise ValueError("A2A needs the runtime's task store (TaskHost)")
        self.port = port
        self.settings = settings or CardSettings()
        self.clock = clock or SystemClock()
        store = port.tasks.store
        self.index = A2AIndex(store)
        # A claim left by a process that is gone: on SQLite, one process owns the file, so any
        # claim older than this process is; on PostgreSQL, one older than STALE_SECONDS.
        stale = STALE_SECONDS if store.shared else 0.0
        self.turns = Turns(port, self.index, self.clock, owner=uuid.uuid4().hex, stale=stale)
        self.tasks = Tasks(port, self.index, self.clock)
        self.push = PushDesk(
            self.index,
            self.clock,
            enabled=self.settings.push,
            allow_private=allow_private_webhooks,
        )
        self.push.views = self._view_of
        self.turns.on_change.append(self.push.poke)
        self.handler = AnkkaRequestHandler(port, self.index, self.turns, self.tasks, self.push)
        agents = self.handler.agents
        if default_agent is not None and default_agent not in agents:
            known = ", ".join(sorted(agents)) or "none"
            raise ValueError(f"--a2a-default {default_agent!r} is not an agent (agents: {known})")
        self.root_agent = default_agent or (next(iter(agents)) if len(agents) == 1 else None)

    async def _view_of(self, task: str) -> TaskView | None:
        row = await self.index.get(task)
        if row is not None and row.kind == "turn":
            return await self.turns.view(row)
        try:
            return await self.tasks.view(task)
        except Exception:
            return None

    async def __aenter__(self) -> A2AService:
        await self.index.create()
        await self.push.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.turns.aclose()
        await self.push.__aexit__(*exc)

    # -- routes -------------------------------------------------------------------------------

    def _card(self, request: Request, agent: str) -> Response:
        info = self.handler.agents.get(agent)
        if info is None:
            return _no_agent(agent, self.handler.agents)
        base = base_url(
            self.settings,
            scheme=request.url.scheme,
            host=request.headers.get("host"),
            agent=agent,
        )
        card = agent_card(info, self.settings, base)
        return JSONResponse(agent_card_to_dict(card))

    def routes(self) -> list[BaseRoute]:
        builder = _Context()

        async def card(request: Request) -> Response:
            return self._card(request, request.path_params["agent"])

        async def root_card(request: Request) -> Response:
            if self.root_agent is None:
                names = ", ".join(f"/a2a/{n}{CARD_PATH}" for n in sorted(self.handler.agents))
                body = {
                    "error": {
                        "type": "not_found",
                        "message": "this runtime serves several agents, each with its own "
                        f"card: {names} (ankka serve --a2a-default AGENT serves one here)",
                    }
                }
                return JSONResponse(body, status_code=404)
            return self._card(request, self.root_agent)

        def known(
            endpoint: Callable[[Request], Awaitable[Response]], path: str
        ) -> Callable[..., object]:
            template = SimpleNamespace(path=path)  # the route a server span is named by

            async def checked(request: Request) -> Response:
                request.scope["route"] = template
                agent = request.path_params.get("agent", "")
                if agent not in self.handler.agents:
                    return _no_agent(agent, self.handler.agents)
                refusal = await _bad_status(request)
                if refusal is not None:
                    return refusal
                return await endpoint(request)

            return checked

        rpc = create_jsonrpc_routes(self.handler, "/a2a/{agent}", context_builder=builder)
        rest = create_rest_routes(self.handler, context_builder=builder, path_prefix="/a2a/{agent}")
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


def _no_agent(agent: str, agents: object) -> Response:
    names = ", ".join(sorted(agents))  # type: ignore[call-overload]
    body = {
        "error": {
            "type": "not_found",
            "message": f"there is no agent {agent[:100]!r} (agents: {names or 'none'})",
        }
    }
    return JSONResponse(body, status_code=404)
