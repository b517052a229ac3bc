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
  else the initialize handshake at 2025-06-18 or newer); on 2026-07-28 a result without
  ``resultType`` is a complete one, as the protocol says (:mod:`.result_type`).
- **Headers** go on the HTTP client and nowhere else; nothing here logs them. An OAuth
  ``auth`` (:mod:`.oauth`) goes there too: the SDK's provider answers a 401 or a 403
  ``insufficient_scope`` itself; every token it obtains joins the values redacted from what
  the server answers.
- **Hostile answers**: one answer is at most :data:`~.bounded.MAX_ANSWER_BYTES`, cut off
  as it arrives (:mod:`.bounded`); a call result that does not fit the protocol is a tool
  error naming what was wrong; a listing the SDK refuses whole is read tool by tool
  (:mod:`.lenient`), and the tools it refuses are left out, each with its reason.
- **Health**: while a session is held the supervisor pings the server every
  ``ping_interval`` seconds (and at once after a request timed out); a ping that fails ends the
  session, so :attr:`problem` says the server is down within one interval, and reconnecting
  starts.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import Client
from mcp.client.session import ElicitationFnT, SamplingFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthToken
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    REQUEST_TIMEOUT,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    Implementation,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ankka._kernel.errors import DependencyFailed
from ankka.runtime.features.mcp.asking import Call, InFlight, Question
from ankka.runtime.features.mcp.bounded import MAX_ANSWER_BYTES, BoundedTransport, too_large
from ankka.runtime.features.mcp.config import McpServerSettings
from ankka.runtime.features.mcp.lenient import lenient_page, refusal
from ankka.runtime.features.mcp.result_type import absent_means_complete
from ankka.runtime.features.mcp.results import redact

__all__ = ["CallFailed", "Listed", "McpConnection"]

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


class CallFailed(DependencyFailed):
    """A request to the server did not give an answer; the text is the tool error's (the
    turn goes on: the model sees it as the call's error result)."""

    kind = "mcp_call_failed"
    status = 502

    def __init__(self, message: str, *, error_type: str = "unavailable", code: int | None = None):
        super().__init__(message)
        self.error_type = error_type
        """What went wrong, bounded (the span's ``error.type``): the JSON-RPC error's code,
        ``timeout``, ``connection_lost``, ``too_large``, ``invalid_result``, ``unavailable``."""
        self.code = code
        """The JSON-RPC error's code, when the server answered with one."""


class Listed:
    """A server's tools as ``tools/list`` answered them (every page), and why any the
    protocol's schema refuses were left out."""

    def __init__(self, tools: list[Any], problems: dict[str, str]) -> None:
        self.tools = tools
        self.problems = problems


class McpConnection:
    def __init__(
        self,
        settings: McpServerSettings,
        *,
        initial_pause: float = INITIAL_PAUSE,
        max_pause: float = MAX_PAUSE,
        on_change: Callable[[McpConnection], None] | None = None,
        auth: httpx2.Auth | None = None,
        elicitation: ElicitationFnT | None = None,
        sampling: SamplingFnT | None = None,
        asks: bool = False,
    ) -> None:
        """``elicitation`` and ``sampling`` answer the server's requests themselves (the
        conformance client's); else ``asks`` declares elicitation and gives each question to
        the turn whose call is in flight (:mod:`.asking`), as it does sampling requests when
        an agent allows them of this server (``settings.sampling``)."""
        self.settings = settings
        self.name = settings.name
        self.auth = auth
        """The OAuth provider (:mod:`.oauth`), if the server has one; set before :meth:`run`."""
        self._elicitation = elicitation or (self._on_elicit if asks else None)
        self._sampling = sampling or (self._on_sample if asks and settings.sampling else None)
        self.in_flight = InFlight()
        self._tokens: set[str] = set()
        self._check = False  # the supervisor should ping now
        self._refused_with: int | None = None  # the last 401/403 of the MCP endpoint
        self.problem: str | None = "not connected yet"
        self.protocol: str | None = None
        self.session_id: str | None = None
        """The server's ``mcp-session-id`` of the current session (handshake-era sessions)."""
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

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every value to redact: the configured secrets and the tokens obtained so far."""
        values = {*self.settings.secrets, *self._tokens}
        return tuple(sorted(values, key=len, reverse=True))

    def saw_tokens(self, tokens: OAuthToken) -> None:
        for value in (tokens.access_token, tokens.refresh_token):
            if value and len(self._tokens) < 64:
                self._tokens.add(value)

    # -- the supervisor ---------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, hold, reconnect; until :meth:`stop`. Runs in its owner's task group."""
        pause = self._initial_pause
        while not self._stopping:
            try:
                async with AsyncExitStack() as stack:
                    client = await stack.enter_async_context(await self._open(stack))
                    absent_means_complete(client)
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
        problem = "the session ended; reconnecting"
        try:
            while True:
                async with self._state:
                    try:
                        async with asyncio.timeout(self._ping_pause()):
                            await self._state.wait_for(
                                lambda: self._leave or self._stopping or self._check
                            )
                    except TimeoutError:
                        pass
                    if self._leave or self._stopping:
                        return
                    self._check = False
                failure = await self._ping(client)
                if failure is not None:
                    problem = failure
                    log.warning("MCP server %r is down: %s", self.name, failure)
                    return
        finally:
            await self._set(client=None, problem=problem)

    def _ping_pause(self) -> float | None:
        interval = self.settings.ping_interval
        return interval if interval > 0 else None

    async def _ping(self, client: Client) -> str | None:
        """None when the server answered in time, else why not. The cheapest request of the
        protocol: ``ping`` on a handshake session, ``server/discover`` from 2026-07-28 on
        (which has no ping)."""
        wait = min(self.settings.timeout, max(self.settings.ping_interval, 1.0), 10.0)
        try:
            async with asyncio.timeout(wait):
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    await client.session.send_discover(client.protocol_version)
                else:
                    await client.send_ping()
        except TimeoutError:
            return f"it did not answer a ping within {wait:g}s"
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED or exc.code == INTERNAL_ERROR:
                return self._describe(exc)
            return None  # it answered, if with an error: it is up
        except Exception as exc:  # any other failure to get an answer: it is down
            return self._describe(exc)
        return None

    async def _open(self, stack: AsyncExitStack) -> Client:
        generation = self._generation + 1

        self._refused_with = None
        self.session_id = None

        async def on_response(response: httpx2.Response) -> None:
            session = response.headers.get("mcp-session-id")
            if session and len(session) <= 256:
                self.session_id = session
            if response.status_code in (401, 403) and response.request.url == self.settings.url:
                self._refused_with = response.status_code
            # The spec's signal that the server no longer knows the session (it restarted):
            # 404 to a request that carried the session id. That request was not run.
            if response.status_code == 404 and response.request.headers.get("mcp-session-id"):
                self._session_gone = generation

        http = httpx2.AsyncClient(
            transport=BoundedTransport(self.settings.url),
            auth=self.auth,
            headers=dict(self.settings.headers),
            timeout=httpx2.Timeout(
                self.settings.timeout, connect=_CONNECT_TIMEOUT, read=self._read_timeout()
            ),
            event_hooks={"response": [on_response]},
        )
        # The SDK leaves a client it was given open; this stack closes it after the session.
        await stack.enter_async_context(http)
        return Client(
            streamable_http_client(
                self.settings.url, http_client=http, max_sse_event_size=MAX_ANSWER_BYTES
            ),
            mode="auto",
            read_timeout_seconds=self.settings.timeout,
            client_info=Implementation(name="ankka", version="0.1.0"),
            elicitation_callback=self._elicitation,
            sampling_callback=self._sampling,
        )

    def _read_timeout(self) -> float:
        """How long a stream may stay quiet: a call's stays so while the server waits for a
        person's answer, so at least the question's expiry, with room for its answer."""
        return max(_STREAM_READ_TIMEOUT, self.settings.elicitation_timeout + 30.0)

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

    async def check_soon(self) -> None:
        """Ping the server now (a request failed without saying why)."""
        async with self._state:
            self._check = True
            self._state.notify_all()

    async def ping(self) -> None:
        """One ping through the current session (:class:`CallFailed` when it fails)."""
        await self._request("ping", lambda client: client.send_ping())

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
        status = self._refused_with
        if isinstance(exc, httpx2.HTTPStatusError):
            status = exc.response.status_code
        if status in (401, 403):
            text += f" (HTTP {status})"
            if self.settings.oauth is None:
                variable = f"ANKKA_MCP_{self.name.upper().replace('-', '_')}_OAUTH"
                text += f"; if the server wants OAuth, set {variable} (docs/mcp.md, OAuth)"
        return redact(f"{type(exc).__name__}: {text}"[:400], self.secrets)

    # -- requests from turns ----------------------------------------------------------------

    async def list_tools(self) -> Listed:
        """Every tool the server lists (walking pages, at most 20); a page the SDK refuses
        is read again tool by tool, leaving out the tools the protocol's schema refuses."""

        async def walk(client: Client) -> Listed:
            listed = Listed([], {})
            cursor: str | None = None
            for _ in range(20):
                try:
                    page = await client.list_tools(cursor=cursor)
                    tools, cursor = list(page.tools), page.next_cursor
                except ValidationError:
                    lenient = await lenient_page(client, cursor)
                    tools, cursor = lenient.tools, lenient.next_cursor
                    listed.problems.update(lenient.problems)
                listed.tools.extend(tools)
                if cursor is None:
                    break
            return listed

        return await self._request("tools/list", walk)

    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any],
        call: Call | None = None,
        meta: dict[str, str] | None = None,
    ) -> Any:
        """Call ``tool``; ``call``: the turn asking, so what the server asks during the call
        reaches it (:mod:`.asking`), and the call's time stops while a person answers;
        ``meta`` goes in the request's ``_meta`` (the trace context)."""
        sent: Any = meta or None
        if call is None:
            return await self._request(
                f"tool {tool!r}", lambda client: client.call_tool(tool, arguments, meta=sent)
            )
        # The SDK's own clock is off (it would count a person's time, however many questions
        # the call asks); the call's deadline, ``timeout`` of the server's time and stopped
        # while a question waits, bounds it, and the question's own expiry the person.
        self.in_flight.calls.append(call)
        try:
            return await self._request(
                f"tool {tool!r}",
                lambda client: client.call_tool(
                    tool, arguments, read_timeout_seconds=math.inf, meta=sent
                ),
                call,
            )
        finally:
            self.in_flight.calls.remove(call)

    async def _request(
        self, what: str, send: Callable[[Client], Awaitable[T]], call: Call | None = None
    ) -> T:
        for attempt in (1, 2):
            client, generation = await self._current()
            try:
                # Past the SDK's own clock (``timeout``), except for a call whose clock is
                # this deadline alone.
                bound = self.settings.timeout + (5.0 if call is None else 0.0)
                async with asyncio.timeout(bound) as deadline:
                    if call is not None:
                        call.deadline = deadline
                    return await send(client)
            except MCPError as exc:
                if self._session_gone == generation and attempt == 1:
                    # The server restarted and never ran this request: new session, once more.
                    log.info("MCP server %r forgot the session; re-initialising", self.name)
                    await self._reconnect(generation, now=True)
                    continue
                if too_large(exc.message):
                    raise CallFailed(
                        f"MCP server {self.name!r} answered {what} with more than "
                        f"{MAX_ANSWER_BYTES} bytes; the answer was not read",
                        error_type="too_large",
                    ) from None
                if exc.code == CONNECTION_CLOSED:
                    await self._reconnect(generation)
                    raise self._lost(what) from exc
                message = redact(exc.message[:500], self.secrets)
                if exc.code == REQUEST_TIMEOUT:  # the SDK's own: no answer in time
                    await self.check_soon()
                    raise CallFailed(
                        f"MCP server {self.name!r} did not answer {what} within "
                        f"{self.settings.timeout:g}s",
                        error_type="timeout",
                    ) from exc
                raise CallFailed(
                    f"MCP server {self.name!r} answered {what} with an error: {message}",
                    error_type=str(exc.code),
                    code=exc.code,
                ) from exc
            except (ValidationError, ValueError) as exc:
                # The server answered, but not with what the protocol allows (a result of the
                # wrong shape, structured content its output schema refuses): a tool error.
                why = refusal(exc) if isinstance(exc, ValidationError) else str(exc)[:300]
                raise CallFailed(
                    f"MCP server {self.name!r} answered {what} with a result that does not "
                    f"fit the protocol: {redact(why, self.secrets)}",
                    error_type="invalid_result",
                ) from None
            except RuntimeError as exc:
                raise CallFailed(
                    f"MCP server {self.name!r} answered {what} with a result the client "
                    f"refused: {redact(str(exc)[:300], self.secrets)}",
                    error_type="invalid_result",
                ) from None
            except TimeoutError as exc:
                await self.check_soon()
                raise CallFailed(
                    f"MCP server {self.name!r} did not answer {what} within "
                    f"{self.settings.timeout:g}s",
                    error_type="timeout",
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

    # -- what the server asks during a call (:mod:`.asking`) ---------------------------------

    async def _on_elicit(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        call = self.in_flight.only()
        if call is None or not isinstance(params, ElicitRequestFormParams):
            why = "it is not a form" if call is not None else "no single call is in flight"
            log.warning("MCP server %r asked a question; answered cancel (%s)", self.name, why)
            return ElicitResult(action="cancel")
        question = Question(
            self.name,
            call.tool,
            call.call_id,
            params.message,
            dict(params.requested_schema),
            self.settings.elicitation_timeout,
        )
        call.hold()  # a person's time is not the server's
        try:
            answer = await call.asker.elicit(question)
        finally:
            call.release()
        return ElicitResult(action=answer.action, content=answer.content)

    async def _on_sample(
        self, context: Any, params: CreateMessageRequestParams
    ) -> CreateMessageResult | ErrorData:
        call = self.in_flight.only()
        if call is None:
            log.warning("MCP server %r asked for sampling; no single call is in flight", self.name)
            return ErrorData(code=INVALID_REQUEST, message="Sampling not supported")
        messages: list[tuple[str, str]] = [(m.role, _text(m.content)) for m in params.messages]
        sampled = await call.asker.sample(
            self.name, params.system_prompt, messages, params.max_tokens
        )
        if sampled.text is None:
            return ErrorData(code=INVALID_REQUEST, message=sampled.why or "Sampling not supported")
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text=sampled.text),
            model=sampled.model,
            stop_reason=sampled.stop_reason,
        )

    def _lost(self, what: str) -> CallFailed:
        return CallFailed(
            f"the connection to MCP server {self.name!r} broke during {what}; it may or may "
            "not have run, and it is not sent again",
            error_type="connection_lost",
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


def _text(content: Any) -> str:
    """A sampling message's text: its text blocks joined; other blocks named."""
    blocks = content if isinstance(content, list) else [content]
    parts = []
    for block in blocks:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]")
    return "\n".join(parts)
