"""The A2A paths mounted without the a2a-sdk's server: its routes (:mod:`.routes`, which
import the SDK's bindings, FastAPI's routing with them and its request handlers) are built at
the first A2A request, once, on the event loop's thread, so ``ankka serve`` listens without
them. What A2A owes at start (its tables, the push outbox's deliveries, the turns in flight)
is :class:`~.service.A2AService`'s and needs none of it.

Every path under ``/a2a/`` (but that one) and the host root's ``/.well-known/agent-card.json``
go to the built routes, which answer as if they were mounted from the start: a path or method
they do not have is routing's 404 or 405, as anywhere in the API. Routes that cannot be built
(an installation missing the SDK's server) answer 500 ``configuration_error`` saying so, and
the next A2A request tries again; the runtime's own API answers all along. The build imports
on the event loop's thread, as a model SDK's first call does: the loop waits for it, once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from starlette._utils import get_route_path
from starlette.datastructures import URLPath
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Match, NoMatchFound, Router
from starlette.types import Receive, Scope, Send

__all__ = ["A2A_PREFIX", "CARD_PATH", "LazyRoutes"]

log = logging.getLogger("ankka.runtime.a2a")

A2A_PREFIX = "/a2a/"
CARD_PATH = "/.well-known/agent-card.json"


class LazyRoutes(BaseRoute):
    """HTTP requests for a path under :data:`A2A_PREFIX` or at :data:`CARD_PATH`, answered by
    the routes ``build`` returns, called once, at the first of them."""

    def __init__(self, build: Callable[[], Sequence[BaseRoute]]) -> None:
        self._build = build
        self._router: Router | None = None
        self._lock = asyncio.Lock()

    @property
    def built(self) -> bool:
        return self._router is not None

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http":
            path = get_route_path(scope)
            # Not ``/a2a/`` itself, where no route is: routing's slash redirect from ``/a2a``
            # would find it here, and answer 307 where it answered 404.
            if (path.startswith(A2A_PREFIX) and path != A2A_PREFIX) or path == CARD_PATH:
                return Match.FULL, {}
        return Match.NONE, {}

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        raise NoMatchFound(name, path_params)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        router = self._router
        if router is None:
            async with self._lock:  # one build, whoever else asks meanwhile waits for it
                if self._router is None:
                    try:
                        self._router = Router(routes=list(self._build()))
                    except Exception as exc:
                        log.exception("A2A: its routes could not be built")
                        await _unbuilt(exc)(scope, receive, send)
                        return
                router = self._router
        await router(scope, receive, send)


def _unbuilt(exc: Exception) -> JSONResponse:
    message = (
        f"A2A is unavailable here: its routes could not be loaded ({type(exc).__name__}: "
        f"{str(exc)[:200]}); install ankka with its dependencies (the a2a-sdk with its "
        "http-server extra); the runtime's own API still answers"
    )
    return JSONResponse({"error": {"type": "configuration_error", "message": message}}, 500)
