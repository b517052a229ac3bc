"""One MCP session per server per runtime process, owned by one task (the official SDK).

The SDK's client is an anyio context: it must be entered and left by the same task, or its
teardown fails ("cancel scope in a different task"). So each server has a supervisor task
(:meth:`McpConnection.run`, started by :class:`~.servers.McpServers` in its task group) that
enters the client, holds it while the session is good, and leaves it in the same task. Request
tasks only send through it.

- **Connecting**: at start, and again with a growing pause (0.2 s doubling to 30 s) while the
  server cannot be reached; :attr:`problem` says why it is missing (``/readyz`` shows it).
- **A session the server no longer knows** (HTTP 404 on a request carrying the session id: the
  server restarted): the server did not run that request, so the client re-initialises at once
  and sends it again, once. A call whose connection broke while it was in flight may or may
  not have run: it is a tool error, never sent twice, and the supervisor reconnects.
- **Protocol**: as the SDK negotiates (``mode="auto"``: 2026-07-28 where the server speaks it,
  else the initialize handshake at 2025-06-18 or newer).
- **Headers** go on the HTTP client and nowhere else; nothing here logs them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, Implementation

from ankka._kernel.errors import AnkkaError
from ankka.runtime.features.mcp.config import McpServerSettings
from ankka.runtime.features.mcp.results import redact

__all__ = ["CallFailed", "McpConnection"]

log = logging.getLogger("ankka.runtime.mcp")

T = TypeVar("T")

INITIAL_PAUSE = 0.2
MAX_PAUSE = 30.0
_CONNECT_TIMEOUT = 10.0
_STREAM_READ_TIMEOUT = 300.0  # the server-to-client stream may stay quiet this long
_LOST = (
    httpx2.TransportError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    ConnectionError,
)


class CallFailed(AnkkaError):
    """A request to the server did not give an answer; the text is the tool error's (the
    turn goes on: the model sees it as the call's error result)."""

    kind = "mcp_call_failed"
    status = 502


class McpConnection:
    def __init__(
        self,
        settings: McpServerSettings,
        *,
        initial_pause: float = INITIAL_PAUSE,
        max_pause: float = MAX_PAUSE,
        on_change: Callable[[McpConnection], None] | None = None,
    ) -> None:
        self.settings = settings
        self.name = settings.name
        self.problem: str | None = "not connected yet"
        self.protocol: str | None = None
        self._initial_pause = initial_pause
        self._max_pause = max_pause
        self._on_change = on_change
        self._client: Client | None = None
        self._generation = 0
        self._attempts = 0
        self._session_gone = -1  # the generation whose session a 404 ended
        self._leave = False  # the supervisor should leave the current session
        self._now = False  # ... and try again without pausing
        self._stopping = False
        self._state = asyncio.Condition()

    @property
    def connected(self) -> bool:
        return self._client is not None

    # -- the supervisor ---------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, hold, reconnect; until :meth:`stop`. Runs in its owner's task group."""
        pause = self._initial_pause
        while not self._stopping:
            try:
                async with AsyncExitStack() as stack:
                    client = await stack.enter_async_context(await self._open(stack))
                    await self._hold(client)
                    pause = self._initial_pause
            except Exception as exc:
                await self._set(problem=self._describe(exc))
            now, self._now, self._leave = self._now, False, False
            if self._stopping:
                break
            if not now:
                log.warning(
                    "MCP server %r is not connected (%s); next attempt in %.1fs",
                    self.name,
                    self.problem,
                    pause,
                )
                await self._sleep(pause)
                pause = min(pause * 2, self._max_pause)

    async def _hold(self, client: Client) -> None:
        self.protocol = client.protocol_version
        await self._set(client=client)
        log.info("connected to MCP server %r (protocol %s)", self.name, self.protocol)
        try:
            async with self._state:
                await self._state.wait_for(lambda: self._leave or self._stopping)
        finally:
            await self._set(client=None, problem="the session ended; reconnecting")

    async def _open(self, stack: AsyncExitStack) -> Client:
        generation = self._generation + 1

        async def on_response(response: httpx2.Response) -> None:
            # The spec's signal that the server no longer knows the session (it restarted):
            # 404 to a request that carried the session id. That request was not run.
            if response.status_code == 404 and response.request.headers.get("mcp-session-id"):
                self._session_gone = generation

        http = httpx2.AsyncClient(
            headers=dict(self.settings.headers),
            timeout=httpx2.Timeout(
                self.settings.timeout, connect=_CONNECT_TIMEOUT, read=_STREAM_READ_TIMEOUT
            ),
            event_hooks={"response": [on_response]},
        )
        # The SDK leaves a client it was given open; this stack closes it after the session.
        await stack.enter_async_context(http)
        return Client(
            streamable_http_client(self.settings.url, http_client=http),
            mode="auto",
            read_timeout_seconds=self.settings.timeout,
            client_info=Implementation(name="ankka", version="0.1.0"),
        )

    async def _set(self, *, client: Client | None = None, problem: str | None = None) -> None:
        async with self._state:
            self._client = client
            if client is not None:
                self._generation += 1
                self.problem = None
            else:
                self.problem = problem
                self._attempts += 1
            self._state.notify_all()
        if self._on_change is not None:
            self._on_change(self)

    async def _sleep(self, seconds: float) -> None:
        async with self._state:
            try:
                async with asyncio.timeout(seconds):
                    await self._state.wait_for(lambda: self._stopping or self._now)
            except TimeoutError:
                pass

    async def stop(self) -> None:
        async with self._state:
            self._stopping = True
            self._state.notify_all()

    async def first_attempt(self) -> None:
        """Return once the first connection attempt has ended, either way."""
        async with self._state:
            await self._state.wait_for(lambda: self._client is not None or self._attempts > 0)

    def _describe(self, exc: BaseException) -> str:
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        text = str(exc) or type(exc).__name__
        return redact(f"{type(exc).__name__}: {text}"[:300], self.settings.secrets)

    # -- requests from turns ----------------------------------------------------------------

    async def list_tools(self) -> list[Any]:
        """Every tool the server lists (walking pages, at most 20)."""

        async def walk(client: Client) -> list[Any]:
            tools: list[Any] = []
            cursor: str | None = None
            for _ in range(20):
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            return tools

        return await self._request("tools/list", walk)

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> Any:
        return await self._request(
            f"tool {tool!r}", lambda client: client.call_tool(tool, arguments)
        )

    async def _request(self, what: str, send: Callable[[Client], Awaitable[T]]) -> T:
        for attempt in (1, 2):
            client, generation = await self._current()
            try:
                async with asyncio.timeout(self.settings.timeout + 5.0):
                    return await send(client)
            except MCPError as exc:
                if self._session_gone == generation and attempt == 1:
                    # The server restarted and never ran this request: new session, once more.
                    log.info("MCP server %r forgot the session; re-initialising", self.name)
                    await self._reconnect(generation, now=True)
                    continue
                if exc.code == CONNECTION_CLOSED:
                    await self._reconnect(generation)
                    raise self._lost(what) from exc
                message = redact(exc.message[:500], self.settings.secrets)
                raise CallFailed(
                    f"MCP server {self.name!r} answered {what} with an error: {message}"
                ) from exc
            except TimeoutError as exc:
                raise CallFailed(
                    f"MCP server {self.name!r} did not answer {what} within "
                    f"{self.settings.timeout:g}s"
                ) from exc
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                # The session was torn down under the request (its connection broke).
                await self._reconnect(generation)
                raise self._lost(what) from None
            except _LOST as exc:
                await self._reconnect(generation)
                raise self._lost(what) from exc
        raise CallFailed(f"MCP server {self.name!r} forgot its session twice in a row")

    def _lost(self, what: str) -> CallFailed:
        return CallFailed(
            f"the connection to MCP server {self.name!r} broke during {what}; it may or may "
            "not have run, and it is not sent again"
        )

    async def _current(self) -> tuple[Client, int]:
        """The connected client, waiting briefly for a reconnection that is under way."""
        async with self._state:
            if self._client is None and self._now:
                seen = self._attempts
                try:
                    async with asyncio.timeout(_CONNECT_TIMEOUT):
                        await self._state.wait_for(
                            lambda: self._client is not None or self._attempts > seen
                        )
                except TimeoutError:
                    pass
            if self._client is None:
                raise CallFailed(f"MCP server {self.name!r} is not connected: {self.problem}")
            return self._client, self._generation

    async def _reconnect(self, generation: int, *, now: bool = False) -> None:
        async with self._state:
            if self._generation == generation and self._client is not None:
                self._leave = True
                self._now = now
                self._state.notify_all()
            if now:
                try:
                    async with asyncio.timeout(_CONNECT_TIMEOUT):
                        await self._state.wait_for(
                            lambda: (
                                self._generation > generation
                                or self._stopping
                                or (self._client is None and not self._now)
                            )
                        )
                except TimeoutError:
                    pass
