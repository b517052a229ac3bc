"""A small HTTP server written by hand on loopback, for tests that must force a behaviour
(a server that closes idle connections, never answers, or speaks nonsense) on an HTTP client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

__all__ = ["Handler", "read_request", "serve"]

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[int]:
    """Serve ``handler`` on loopback and yield its port; on exit, its connections' handlers
    still running (a server that never answers) are cancelled and awaited, which
    ``Server.close`` does not do."""
    handlers: set[asyncio.Task[None]] = set()

    async def owned(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        await handler(reader, writer)

    server = await asyncio.start_server(owned, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for task in handlers:
            task.cancel()
        if handlers:
            await asyncio.wait(handlers)
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request with a ``Content-Length`` body: its head and its body."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    return head, await reader.readexactly(length)
