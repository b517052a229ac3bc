"""The runtime's HTTP server at its edges: a stream's caller leaving, an unexpected failure.

The app runs on uvicorn on loopback, in the test's own event loop, so what the server did
(the turn cancelled, nothing journaled, no task left behind) can be seen from here. The model
is the only double: a provider that holds its stream until the test says so.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import uvicorn

from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.providers.base import ModelRequest, ModelResponse, TextDelta
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.serve.http import create_app
from tests.support.eventually import eventually_async
from tests.support.runtimes import runtime_for
from tests.support.stores import journal_store

BOUND = 10.0  # seconds any wait below may take before the test fails (a bound, not a measure)


class HeldProvider(ScriptedProvider):
    """Answers from its script, but holds each stream before its first delta until released;
    records whether the stream was cancelled while held."""

    def __init__(self, script: list[str]) -> None:
        super().__init__(script, name="default")
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        async for item in super().stream(request):
            yield item


def service() -> Service:
    declared = Service("edges")

    @declared.agent("streamer")
    def streamer(request: TurnRequest) -> Turn:
        return Turn(message=request.message, answer="stream")

    @declared.agent("faulty")
    def faulty(request: TurnRequest) -> Turn:
        raise RuntimeError("a bug in the handler")

    return declared


@asynccontextmanager
async def serving(runtime: Runtime) -> AsyncIterator[tuple[str, int]]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(create_app(runtime), lifespan="off", log_level="critical")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await until(lambda: server.started)
        yield sock.getsockname()
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, BOUND)
        sock.close()


async def until(condition: Callable[[], bool]) -> None:
    """Wait for ``condition`` to hold, at most :data:`BOUND` seconds."""

    async def check() -> bool:
        return condition()

    await eventually_async(check, what="the condition", timeout=BOUND, interval=0.01)


def post(path: str, body: object) -> bytes:
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n"
    return f"{head}content-length: {len(data)}\r\n\r\n".encode() + data


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, object]]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode()
    status = int(head.split(" ", 2)[1])
    length = next(
        int(line.split(":", 1)[1])
        for line in head.split("\r\n")
        if line.lower().startswith("content-length:")
    )
    return status, json.loads(await reader.readexactly(length))


async def test_a_caller_leaving_before_the_first_event_cancels_the_turn_and_writes_nothing(
    tmp_path: Path,
) -> None:
    provider = HeldProvider(["never sent"])
    store = await journal_store(tmp_path / "j.sqlite3")
    runtime = runtime_for(service(), store=store, providers={"default": provider})
    async with runtime, serving(runtime) as (host, port):
        _, writer = await asyncio.open_connection(host, port)
        writer.write(post("/v1/agents/streamer/sessions/s", {"message": "hi"}))
        await asyncio.wait_for(provider.started.wait(), BOUND)
        assert runtime.context.queue.pending("s") == 1
        writer.close()
        await writer.wait_closed()
        await asyncio.wait_for(provider.cancelled.wait(), BOUND)
        await until(lambda: runtime.context.queue.pending("s") == 0)
        assert await runtime.messages("s") == []
        assert b'ankka_turns_total{agent="streamer",outcome="ok"}' not in runtime.metrics.render()


async def test_an_unexpected_failure_is_a_500_and_the_connection_stays_usable(
    tmp_path: Path,
) -> None:
    store = await journal_store(tmp_path / "j.sqlite3")
    provider = ScriptedProvider([], name="default")
    runtime = runtime_for(service(), store=store, providers={"default": provider})
    async with runtime, serving(runtime) as (host, port):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(post("/v1/agents/faulty/sessions/s", {"message": "hi"}))
            status, body = await asyncio.wait_for(read_response(reader), BOUND)
            assert status == 500
            assert body == {
                "error": {
                    "type": "internal_error",
                    "message": "the runtime failed unexpectedly; see its log",
                }
            }
            writer.write(post("/v1/agents/nobody/sessions/s", {"message": "hi"}))
            status, body = await asyncio.wait_for(read_response(reader), BOUND)
            assert status == 404
            assert body["error"] == {
                "type": "not_found",
                "message": "there is no agent 'nobody' in this service (agents: faulty, streamer)",
            }
        finally:
            writer.close()
            await writer.wait_closed()
