"""A2A in ``ankka serve``: what the layer owns while the server runs, and its routes to mount.

Per agent, at base URL ``/a2a/{agent}``:

- ``GET {base}/.well-known/agent-card.json``: its card (:mod:`.card`);
- ``POST {base}``: the JSON-RPC binding (``SendMessage``, ``SendStreamingMessage``,
  ``GetTask``, ``ListTasks``, ``CancelTask``, ``SubscribeToTask``, the push config methods);
- ``{base}/message:send``, ``{base}/tasks/{id}``, ...: the HTTP+JSON binding.

And ``GET /.well-known/agent-card.json``, the host root where generic clients look first, for a
service with one agent (or the one ``ankka serve --a2a-default`` names). The bindings are the
SDK's own (``a2a.server.routes``), over :class:`~.handler.AnkkaRequestHandler` (:mod:`.routes`);
they check the ``A2A-Version`` service parameter (1.x; none means 0.3, which is refused with
VersionNotSupportedError). The identity layer in front of every route names the caller, as for
the runtime's own API.

The routes are mounted at start and built at the first A2A request (:mod:`.mount`), so the
SDK's server is not imported before ``ankka serve`` listens; the layer's tables, the push
outbox's deliveries and the turns in flight are this service's, from start.
"""

from __future__ import annotations

import uuid

from starlette.routing import BaseRoute

from ankka._kernel.clock import Clock, SystemClock
from ankka.runtime.serve.a2a.card import CardSettings
from ankka.runtime.serve.a2a.index import A2AIndex
from ankka.runtime.serve.a2a.mount import LazyRoutes
from ankka.runtime.serve.a2a.port import RuntimePort
from ankka.runtime.serve.a2a.push import PushDesk
from ankka.runtime.serve.a2a.tasks import Tasks
from ankka.runtime.serve.a2a.turns import Turns
from ankka.runtime.serve.a2a.wire import TaskView

__all__ = ["A2AService"]

STALE_SECONDS = 300.0  # on a shared store, another process's unfinished claim is left this long


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
        self.agents = agents = port.agents()
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

    def routes(self) -> list[BaseRoute]:
        """The A2A paths, answered by :func:`.routes.a2a_routes` built at their first request."""

        def build() -> list[BaseRoute]:
            from ankka.runtime.serve.a2a.routes import a2a_routes

            return a2a_routes(self)

        return [LazyRoutes(build)]
