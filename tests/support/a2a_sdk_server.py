"""An A2A agent built only with the official ``a2a-sdk`` (its default request handler, task
store and Starlette routes): the outside agent the client tests delegate to, and the floor of
bench/a2a_overhead.py.

Run it: ``python -m tests.support.a2a_sdk_server --port 0 [--delay S] [--fail WORD]``. It
prints ``a2a-sdk server: listening on http://127.0.0.1:PORT``; its agent at that URL echoes
the message's text as an artifact after ``--delay`` seconds (working in between), fails a
task whose text contains ``--fail``, and counts the messages it was sent at ``GET /_count``
(the tests' proof that a message was sent once).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from typing import Any

import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.agent_execution.context import RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ["main"]

COUNT: dict[str, int] = {"messages": 0}
TRACEPARENTS: list[str] = []  # of the requests to "/", in order (the last 100)


class _Heard:
    """Keep the ``traceparent`` each request to the JSON-RPC endpoint carried."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/":
            for name, value in scope["headers"]:
                if name == b"traceparent":
                    TRACEPARENTS[:] = [*TRACEPARENTS[-99:], value.decode("latin-1")]
        await self.app(scope, receive, send)


class Echo(AgentExecutor):
    def __init__(self, delay: float, fail: str | None) -> None:
        self.delay = delay
        self.fail = fail

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        COUNT["messages"] += 1
        text = " ".join(p.text for p in message.parts if p.WhichOneof("content") == "text")
        task = context.current_task or new_task_from_user_message(message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if self.delay:
            await updater.start_work()
            await asyncio.sleep(self.delay)
        if self.fail is not None and self.fail in text:
            reason = new_text_message(f"cannot do {text!r}", role=pb.ROLE_AGENT)
            await updater.failed(reason)
            return
        await updater.add_artifact([pb.Part(text=f"echo: {text}")], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is not None:
            await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def app(url: str, delay: float, fail: str | None) -> Any:
    card = pb.AgentCard(
        name="sdk-echo",
        description="Echoes a message (the a2a-sdk's own server).",
        version="1",
        supported_interfaces=[
            pb.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=pb.AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[pb.AgentSkill(id="echo", name="echo", description="Echoes.", tags=["echo"])],
    )
    handler = DefaultRequestHandler(Echo(delay, fail), InMemoryTaskStore(), card)

    async def count(request: Request) -> Response:
        return JSONResponse({**COUNT, "traceparents": TRACEPARENTS})

    routes: list[Any] = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, "/"),
        Route("/_count", count, methods=["GET"]),
    ]
    return _Heard(Starlette(routes=routes))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="a2a-sdk server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--fail", default=None)
    args = parser.parse_args(argv)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)  # before the line that says so: a caller who connects then waits
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    server = uvicorn.Server(
        uvicorn.Config(app(url, args.delay, args.fail), log_level="warning", lifespan="off")
    )
    print(f"a2a-sdk server: listening on {url}", flush=True)
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
