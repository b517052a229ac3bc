"""Every MCP server of one runtime: their sessions, readiness, and the tools each turn gets.

:class:`McpServers` is an async context manager owning one supervisor task per server (in
its own task group, so no task outlives it); entering it connects every server (waiting at
most :data:`START_WAIT` seconds: a server that is down does not stop the runtime from
starting), leaving it ends every session in the task that opened it.

For a turn, :meth:`McpServers.tools_for` offers the tools of each server the agent uses, as
the server's last good listing has them (:mod:`.lister`: refreshed in the background on every
turn, so a turn sees a change at once when the server answers quickly and never waits on one
that does not), screens their descriptions with the turn's description guardrails, and gives
back :class:`McpTool` values for the loop and one record per server for the journal: the
digest alone when the session recorded this listing last, else its changes since the
session's last listing (when this process still holds that one), else the whole listing
(:mod:`ankka.runtime.records.mcp`). Tools a listing should not have offered (a name twice, a
schema the protocol or JSON Schema refuses, a name a model API refuses) are left out, logged,
counted and named in :meth:`McpServers.detail` (``/readyz``). A turn that needs a server that
is not connected fails at once with :class:`McpServerUnavailable` naming it and why (nothing
was sent to a model yet).

A server with ``ANKKA_MCP_<SERVER>_OAUTH`` gets its tokens through :mod:`.oauth`; the
credentials live in the one :class:`~.credentials.CredentialStore` of the runtime, and a
person's consent waits at the :class:`~.consent.ConsentDesk`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, ClassVar

from prometheus_client import CollectorRegistry

from ankka._kernel import genai, tracing
from ankka._kernel.clock import Clock, SystemClock
from ankka._kernel.errors import TurnFailed
from ankka.runtime.declare.guardrails import Guardrail
from ankka.runtime.declare.tools import ApprovalRule, ToolOutcome, ToolSpec
from ankka.runtime.engine.executor import RUNNING
from ankka.runtime.features.mcp import spans as mcp_spans
from ankka.runtime.features.mcp.asking import ASKING, Call
from ankka.runtime.features.mcp.compiled import Compiled, Compiler
from ankka.runtime.features.mcp.config import McpServerSettings
from ankka.runtime.features.mcp.connection import CallFailed, McpConnection
from ankka.runtime.features.mcp.consent import ConsentDesk
from ankka.runtime.features.mcp.credentials import CredentialStore, MemoryStore
from ankka.runtime.features.mcp.lister import ToolLister
from ankka.runtime.features.mcp.listing import screen
from ankka.runtime.features.mcp.logs import SecretsFilter, watched_loggers
from ankka.runtime.features.mcp.metrics import McpMetrics
from ankka.runtime.features.mcp.results import ArgumentCheck, guard, parse_arguments, redact, render
from ankka.runtime.records.mcp import ListedTool, McpListingRecord, offered_name

WAITS = ApprovalRule(True, None, None)  # a marked MCP tool: every call waits

__all__ = [
    "START_WAIT",
    "STOP_WAIT",
    "McpServerUnavailable",
    "McpServers",
    "McpTool",
    "TurnTools",
]

log = logging.getLogger("ankka.runtime.mcp")

START_WAIT = 10.0
STOP_WAIT = 5.0
DEFAULT_REDIRECT_BASE = "http://127.0.0.1:8000"


class McpServerUnavailable(TurnFailed):
    """A turn needs an MCP server that has no session now; ``server`` names it."""

    kind = "mcp_server_unavailable"
    status = 503

    def __init__(self, server: str, why: str) -> None:
        super().__init__(f"MCP server {server!r} is not available: {why}")
        self.server = server


@dataclass(frozen=True, slots=True, eq=False)
class McpTool:
    """One MCP tool as one turn offers it (``mcp__<server>__<tool>``)."""

    name: str
    spec: ToolSpec
    tool: str
    connection: McpConnection
    check: ArgumentCheck
    result_guardrails: tuple[Guardrail, ...]
    metrics: McpMetrics
    clock: Clock
    approval: ApprovalRule | None = None  # every call of the tool waits for a decision
    tool_type: ClassVar[str] = "extension"  # its span's gen_ai.tool.type

    def needs_approval(self, raw_arguments: str) -> bool:
        """A server's tool waits for every call or none (its rule has no predicate)."""
        return self.approval is not None and self.approval.needed(None)

    def _asking(self) -> Call | None:
        """The turn this call belongs to, for what the server asks during it."""
        asker, running = ASKING.get(), RUNNING.get()
        if asker is None:
            return None
        return Call(asker, self.name, running.id if running is not None else "")

    def _timed(self, seconds: float, error_type: str | None, code: int | None) -> None:
        """The call's ``mcp.client.operation.duration``, under the span's attributes."""
        attributes = mcp_spans.peer(self.connection)
        attributes[genai.OPERATION_NAME] = "execute_tool"
        attributes[genai.TOOL_NAME] = self.name
        if error_type is not None:
            attributes[genai.ERROR_TYPE] = error_type
        if code is not None:
            attributes[genai.RPC_RESPONSE_STATUS_CODE] = str(code)
        self.metrics.operation(attributes, seconds)

    async def run(self, raw_arguments: str) -> ToolOutcome:
        server, secrets = self.connection.name, self.connection.secrets
        arguments = parse_arguments(raw_arguments, self.name)
        if isinstance(arguments, str):
            problem: str | None = arguments
        else:
            arguments = self.check.settled(arguments)
            problem = self.check.problem(arguments, self.name)
        if problem is not None or isinstance(arguments, str):
            self.metrics.call(server, self.tool, "invalid", None)
            return ToolOutcome(redact(str(problem), secrets), is_error=True)
        traced = tracing.active()  # off: this one test, nothing built
        if traced:
            mcp_spans.sending(self.connection, self.tool)
        started = self.clock.monotonic()
        try:
            result = await self.connection.call_tool(
                self.tool, arguments, self._asking(), mcp_spans.meta() if traced else None
            )
        except CallFailed as failure:
            seconds = self.clock.monotonic() - started
            self.metrics.call(server, self.tool, "failed", seconds)
            self._timed(seconds, failure.error_type, failure.code)
            if traced:
                mcp_spans.failed(failure)
            return ToolOutcome(str(failure), is_error=True)
        seconds = self.clock.monotonic() - started
        rendered = render(result)
        self._timed(seconds, "tool_error" if rendered.is_error else None, None)
        if traced and rendered.is_error:
            mcp_spans.tool_error()
        rendered = type(rendered)(redact(rendered.text, secrets), rendered.is_error)
        checked = await guard(rendered, self.result_guardrails, self.name)
        if checked is not rendered:
            log.warning("a result guardrail withheld the result of %s", self.name)
            outcome = "refused"
        else:
            outcome = "error" if rendered.is_error else "ok"
        self.metrics.call(server, self.tool, outcome, seconds)
        return ToolOutcome(checked.text, checked.is_error)


@dataclass(frozen=True, slots=True)
class TurnTools:
    tools: tuple[McpTool, ...]
    records: tuple[McpListingRecord, ...]


class McpServers:
    def __init__(
        self,
        settings: Mapping[str, McpServerSettings],
        *,
        registry: CollectorRegistry | None = None,
        clock: Clock | None = None,
        start_wait: float = START_WAIT,
        initial_pause: float | None = None,
        credentials: CredentialStore | None = None,
        consent: ConsentDesk | None = None,
        redirect_base: str = DEFAULT_REDIRECT_BASE,
        connection_options: Mapping[str, Any] = {},
    ) -> None:
        """``connection_options`` go to every :class:`McpConnection` (e.g. ``elicitation``)."""
        self.metrics = McpMetrics(registry or CollectorRegistry())
        self.clock = clock or SystemClock()
        self.consent = consent or ConsentDesk()
        self.credentials = credentials or MemoryStore()
        self._credentials_lock = asyncio.Lock()
        self._start_wait = start_wait
        self.redirect_base = redirect_base
        """Where a person reaches this runtime (the OAuth callback's base), until entered."""
        extra: dict[str, Any] = dict(connection_options)
        if initial_pause is not None:
            extra["initial_pause"] = initial_pause
        self.connections = {
            name: self._connection(s, extra) for name, s in sorted(settings.items())
        }
        for name in self.connections:
            self.metrics.connected.labels(name).set(0)
        self._group: asyncio.TaskGroup | None = None
        self._filter = SecretsFilter(self.secrets)
        self._filtered: list[logging.Logger] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._compiler = Compiler(self.metrics)
        self._listers = {
            name: ToolLister(c, partial(self._compiler.compile, name), lambda: self._group)
            for name, c in self.connections.items()
        }
        self._screened: OrderedDict[tuple[str, tuple[Guardrail, ...]], tuple[str, ...]] = (
            OrderedDict()
        )

    def _connection(self, settings: McpServerSettings, extra: dict[str, Any]) -> McpConnection:
        return McpConnection(settings, on_change=self._changed, **extra)

    def _authorise(self) -> None:
        """Give each OAuth server its provider (now, so ``redirect_base`` may be set late)."""
        from ankka.runtime.features.mcp.oauth import CALLBACK_PATH, build_auth

        for connection in self.connections.values():
            oauth = connection.settings.oauth
            if oauth is None or connection.auth is not None:
                continue
            connection.auth = build_auth(
                connection.name,
                connection.settings.url,
                oauth,
                store=self.credentials,
                lock=self._credentials_lock,
                desk=self.consent,
                redirect_uri=self.redirect_base.rstrip("/") + CALLBACK_PATH,
                on_tokens=connection.saw_tokens,
            )

    def _changed(self, connection: McpConnection) -> None:
        self.metrics.connected.labels(connection.name).set(1 if connection.connected else 0)
        if connection.connected:
            self.metrics.sessions.labels(connection.name).inc()
            lister = self._listers.get(connection.name)
            if lister is not None:
                lister.kick()  # a listing ready before the first turn asks

    def secrets(self) -> list[str]:
        """Every secret of every server now (configured, and the tokens obtained so far)."""
        return [v for c in self.connections.values() for v in c.secrets]

    async def __aenter__(self) -> McpServers:
        self._authorise()
        self._filtered = watched_loggers()
        for logger in self._filtered:
            logger.addFilter(self._filter)
        group = asyncio.TaskGroup()
        await group.__aenter__()
        self._group = group
        self._tasks = [
            group.create_task(c.run(), name=f"mcp:{c.name}") for c in self.connections.values()
        ]
        try:
            async with asyncio.timeout(self._start_wait):
                for connection in self.connections.values():
                    await connection.first_attempt()
        except TimeoutError:
            pass
        except BaseException:
            await self.__aexit__(None, None, None)  # cancelled while connecting: end them all
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        group, self._group = self._group, None
        if group is None:
            return
        try:
            await self._leave(group)
        finally:
            for logger in self._filtered:
                logger.removeFilter(self._filter)

    async def _leave(self, group: asyncio.TaskGroup) -> None:
        for lister in self._listers.values():
            lister.cancel()
        for connection in self.connections.values():
            await connection.stop()
        # A supervisor holding a session leaves it at once; one still in a handshake with a
        # server that does not answer is cancelled (in its own task, so the SDK unwinds
        # cleanly) rather than waited for.
        _, slow = await asyncio.wait(self._tasks, timeout=STOP_WAIT)
        for task in slow:
            task.cancel()
        await group.__aexit__(None, None, None)

    def missing(self) -> dict[str, str]:
        """Servers without a session, and why."""
        return {
            name: (
                "waiting for a person's consent: open the console's MCP page (/console/mcp)"
                if self.consent.waiting(name)
                else c.problem or "not connected"
            )
            for name, c in self.connections.items()
            if not c.connected
        }

    def detail(self) -> dict[str, dict[str, Any]]:
        """What ``/readyz`` says of servers that are up but not quite as they should be: the
        tools their listing left out and why, and a listing served while a refresh fails."""
        shown: dict[str, dict[str, Any]] = {}
        for name, lister in self._listers.items():
            compiled = self._compiler.last(name)
            entry: dict[str, Any] = {}
            if compiled is not None and compiled.left_out:
                entry["left_out"] = dict(compiled.left_out)
            late = lister.late()
            if compiled is not None and late is not None:
                entry["listing"] = (
                    f"tools/list has not answered for {late:.0f}s; the last good listing is served"
                )
            elif compiled is not None and lister.stale is not None:
                entry["listing"] = f"the last good listing is served: {lister.stale}"
            if entry:
                shown[f"mcp server {name!r}"] = entry
        return shown

    async def tools_for(
        self,
        servers: Iterable[str],
        *,
        agent: str,
        turn: str,
        recorded: Mapping[str, str] = {},
        result_guardrails: Sequence[Guardrail] = (),
        description_guardrails: Sequence[Guardrail] = (),
        approvals: Mapping[str, Callable[[str], bool]] = {},
    ) -> TurnTools:
        """The turn's MCP tools; ``approvals`` maps a server to which of its tools (by the
        server's own name) wait for a decision, beside its ``REQUIRES_APPROVAL`` setting."""
        tools: list[McpTool] = []
        records: list[McpListingRecord] = []
        for server in servers:
            connection = self.connections[server]
            if not connection.connected:
                why = self.missing().get(server, "not connected")
                raise McpServerUnavailable(server, why)
            try:
                compiled = await self._listers[server].current()
            except CallFailed as failure:
                raise McpServerUnavailable(server, str(failure)) from None
            kept = await self._screen(compiled, tuple(description_guardrails))
            for listed_tool in compiled.listing.tools:
                if listed_tool.name in kept:
                    declared = approvals.get(server)
                    waits = connection.settings.needs_approval(listed_tool.name) or bool(
                        declared is not None and declared(listed_tool.name)
                    )
                    tool = self._tool(connection, compiled, listed_tool, result_guardrails)
                    tools.append(replace(tool, approval=WAITS) if waits else tool)
            last = recorded.get(server)
            records.append(self._compiler.record(agent, turn, compiled.listing, last))
        return TurnTools(tuple(tools), tuple(records))

    async def _screen(
        self, compiled: Compiled, guardrails: tuple[Guardrail, ...]
    ) -> tuple[str, ...]:
        key = (compiled.digest, guardrails)
        cached = self._screened.get(key)
        if cached is not None:
            return cached
        kept, refused = await screen(compiled.listing, guardrails)
        for tool, refusal in refused:
            log.warning(
                "MCP server %r: tool %r is left out: %s", compiled.listing.server, tool, refusal
            )
            self.metrics.tools_left_out.labels(compiled.listing.server).inc()
        names = tuple(t.name for t in kept)
        self._screened[key] = names
        while len(self._screened) > 256:
            self._screened.popitem(last=False)
        return names

    def _tool(
        self,
        connection: McpConnection,
        compiled: Compiled,
        tool: ListedTool,
        result_guardrails: Sequence[Guardrail],
    ) -> McpTool:
        name = offered_name(connection.name, tool.name)
        # The schema goes to the model as the server wrote it (a copy, so no provider can
        # change the listing the digest was taken of).
        spec = ToolSpec(name, tool.description, json.loads(json.dumps(tool.input_schema)))
        return McpTool(
            name=name,
            spec=spec,
            tool=tool.name,
            connection=connection,
            check=compiled.checks[tool.name],
            result_guardrails=tuple(result_guardrails),
            metrics=self.metrics,
            clock=self.clock,
        )
