"""Every MCP server of one runtime: their sessions, readiness, and the tools each turn gets.

:class:`McpServers` is an async context manager owning one supervisor task per server (in
its own task group, so no task outlives it); entering it connects every server (waiting at
most :data:`START_WAIT` seconds: a server that is down does not stop the runtime from
starting), leaving it ends every session in the task that opened it.

For a turn, :meth:`McpServers.tools_for` lists the tools of each server the agent uses
(``tools/list``, so the turn sees the server's tools as they are now), screens their
descriptions with the turn's description guardrails, and gives back :class:`McpTool` values
for the loop and one :class:`~.listing.McpToolsRecord` per server for the journal. A server
that is not connected gives no tools that turn.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from prometheus_client import CollectorRegistry

from ankka._kernel.clock import Clock, SystemClock
from ankka.runtime.declare.guardrails import Guardrail
from ankka.runtime.declare.tools import ApprovalRule, ToolOutcome, ToolSpec
from ankka.runtime.features.mcp.config import McpServerSettings
from ankka.runtime.features.mcp.connection import CallFailed, McpConnection
from ankka.runtime.features.mcp.listing import listed, screen
from ankka.runtime.features.mcp.metrics import McpMetrics
from ankka.runtime.features.mcp.results import ArgumentCheck, guard, parse_arguments, redact, render
from ankka.runtime.records.mcp import ListedTool, McpToolsRecord, ToolListing, offered_name

WAITS = ApprovalRule(True, None, None)  # a marked MCP tool: every call waits

__all__ = ["START_WAIT", "STOP_WAIT", "McpServers", "McpTool", "TurnTools"]

log = logging.getLogger("ankka.runtime.mcp")

START_WAIT = 10.0
STOP_WAIT = 5.0


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

    async def run(self, raw_arguments: str) -> ToolOutcome:
        server, secrets = self.connection.name, self.connection.settings.secrets
        arguments = parse_arguments(raw_arguments, self.name)
        if isinstance(arguments, str):
            problem: str | None = arguments
        else:
            problem = self.check.problem(arguments, self.name)
        if problem is not None or isinstance(arguments, str):
            self.metrics.call(server, self.tool, "invalid", None)
            return ToolOutcome(redact(str(problem), secrets), is_error=True)
        started = self.clock.monotonic()
        try:
            result = await self.connection.call_tool(self.tool, arguments)
        except CallFailed as failure:
            self.metrics.call(server, self.tool, "failed", self.clock.monotonic() - started)
            return ToolOutcome(str(failure), is_error=True)
        seconds = self.clock.monotonic() - started
        rendered = render(result)
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
    records: tuple[McpToolsRecord, ...]


@dataclass(frozen=True, slots=True)
class _Compiled:
    """A listing with each tool's argument check, compiled once per digest."""

    listing: ToolListing
    digest: str
    checks: Mapping[str, ArgumentCheck]


class McpServers:
    def __init__(
        self,
        settings: Mapping[str, McpServerSettings],
        *,
        registry: CollectorRegistry | None = None,
        clock: Clock | None = None,
        start_wait: float = START_WAIT,
        initial_pause: float | None = None,
    ) -> None:
        self.metrics = McpMetrics(registry or CollectorRegistry())
        self.clock = clock or SystemClock()
        self._start_wait = start_wait
        extra: dict[str, Any] = {} if initial_pause is None else {"initial_pause": initial_pause}
        self.connections = {
            name: McpConnection(s, on_change=self._changed, **extra)
            for name, s in sorted(settings.items())
        }
        for name in self.connections:
            self.metrics.connected.labels(name).set(0)
        self._group: asyncio.TaskGroup | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._compiled: dict[str, _Compiled] = {}
        self._screened: OrderedDict[tuple[str, tuple[Guardrail, ...]], tuple[str, ...]] = (
            OrderedDict()
        )

    def _changed(self, connection: McpConnection) -> None:
        self.metrics.connected.labels(connection.name).set(1 if connection.connected else 0)
        if connection.connected:
            self.metrics.sessions.labels(connection.name).inc()

    async def __aenter__(self) -> McpServers:
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
            name: c.problem or "not connected"
            for name, c in self.connections.items()
            if not c.connected
        }

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
        records: list[McpToolsRecord] = []
        for server in servers:
            connection = self.connections[server]
            if not connection.connected:
                continue
            try:
                raw = await connection.list_tools()
            except CallFailed as failure:
                log.warning("MCP server %r: its tools sit out this turn: %s", server, failure)
                continue
            compiled = self._compile(server, raw)
            kept = await self._screen(compiled, tuple(description_guardrails))
            for listed_tool in compiled.listing.tools:
                if listed_tool.name in kept:
                    declared = approvals.get(server)
                    waits = connection.settings.needs_approval(listed_tool.name) or bool(
                        declared is not None and declared(listed_tool.name)
                    )
                    tool = self._tool(connection, compiled, listed_tool, result_guardrails)
                    tools.append(replace(tool, approval=WAITS) if waits else tool)
            changed = recorded.get(server) != compiled.digest
            records.append(
                McpToolsRecord(
                    agent,
                    turn,
                    server,
                    compiled.digest,
                    compiled.listing.tools if changed else None,
                )
            )
        return TurnTools(tuple(tools), tuple(records))

    def _compile(self, server: str, raw: Sequence[Any]) -> _Compiled:
        listing, problems = listed(server, raw)
        digest = listing.digest
        cached = self._compiled.get(server)
        if cached is not None and cached.digest == digest:
            return cached
        checks: dict[str, ArgumentCheck] = {}
        kept: list[ListedTool] = []
        for tool in listing.tools:
            problem = ArgumentCheck.compiles(tool.input_schema)
            if problem is not None:
                problems.append(f"tool {tool.name!r}: its input schema is invalid: {problem}")
                continue
            checks[tool.name] = ArgumentCheck(tool.input_schema)
            kept.append(tool)
        for problem in problems:
            log.warning("MCP server %r: %s", server, problem)
            self.metrics.tools_left_out.labels(server).inc()
        listing = ToolListing(server, tuple(kept)) if len(kept) != len(listing.tools) else listing
        compiled = _Compiled(listing, listing.digest, checks)
        self._compiled[server] = compiled
        return compiled

    async def _screen(
        self, compiled: _Compiled, guardrails: tuple[Guardrail, ...]
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
        compiled: _Compiled,
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
