"""The A2A paths are mounted at start and their routes built at the first A2A request
(:mod:`ankka.runtime.serve.a2a.mount`): once, whoever asks at the same time, answering as if
mounted from the start; a build that fails is answered clearly and tried again. The app runs
on uvicorn on loopback, in the test's own event loop."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from ankka.runtime.serve.a2a.mount import CARD_PATH, LazyRoutes
from tests.support.eventually import eventually_async

BOUND = 10.0  # seconds any wait below may take before the test fails (a bound, not a measure)


class Builds:
    """A build of the A2A routes that counts its calls, failing the first ``failures``."""

    def __init__(self, failures: int = 0) -> None:
        self.calls = 0
        self.failures = failures

    def __call__(self) -> list[BaseRoute]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ImportError("No module named 'a2a.server'")

        async def hello(request: Request) -> Response:
            return PlainTextResponse(f"hello from {request.path_params['agent']}")

        async def card(request: Request) -> Response:
            return PlainTextResponse("the root card")

        return [
            Route("/a2a/{agent}/hello", hello, methods=["GET"]),
            Route(CARD_PATH, card, methods=["GET"]),
        ]


@asynccontextmanager
async def serving(build: Callable[[], list[BaseRoute]]) -> AsyncIterator[httpx.AsyncClient]:
    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/healthz", healthz), LazyRoutes(build)])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="critical"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:

        async def started() -> bool:
            return server.started

        await eventually_async(started, what="the server to start", timeout=BOUND)
        host, port = sock.getsockname()[:2]
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=BOUND) as client:
            yield client
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, BOUND)
        sock.close()


async def test_the_routes_are_built_once_at_the_first_a2a_request() -> None:
    build = Builds()
    async with serving(build) as client:
        assert (await client.get("/healthz")).text == "ok"
        for path in ("/a2a", "/a2a/"):  # no A2A path: no redirect to one either
            assert (await client.get(path)).status_code == 404, path
        assert build.calls == 0  # nothing asked for A2A yet
        answers = await asyncio.gather(*(client.get(f"/a2a/a{i}/hello") for i in range(8)))
        assert [a.text for a in answers] == [f"hello from a{i}" for i in range(8)]
        assert (await client.get(CARD_PATH)).text == "the root card"
        assert build.calls == 1
        # What the built routes do not have is routing's answer, as anywhere else.
        assert (await client.get("/a2a/a0/nothing")).status_code == 404
        refused = await client.post("/a2a/a0/hello")
        assert refused.status_code == 405
        assert "GET" in refused.headers["allow"]
        assert build.calls == 1


async def test_routes_that_cannot_be_built_are_answered_clearly_and_built_again() -> None:
    build = Builds(failures=1)
    async with serving(build) as client:
        failed = await client.get("/a2a/a0/hello")
        assert failed.status_code == 500
        error = failed.json()["error"]
        assert error["type"] == "configuration_error"
        assert "ImportError: No module named 'a2a.server'" in error["message"]
        assert "a2a-sdk" in error["message"]  # what to do
        assert (await client.get("/healthz")).text == "ok"  # the rest still answers
        assert (await client.get("/a2a/a0/hello")).text == "hello from a0"
        assert build.calls == 2
