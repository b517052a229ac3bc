"""One server's tool listing, kept and refreshed in the background, so a turn never waits on a
server that does not answer ``tools/list``.

:meth:`ToolLister.current` is what a turn offers: it starts a refresh (unless one is under
way), waits for it at most :data:`GRACE` seconds (so a server that answers at once is seen
as it is now), and otherwise serves the last listing that came back good. Only when no
listing ever came back does a turn wait for one, as long as the server's timeout. A refresh
that fails leaves the last good listing in place and says why (:attr:`ToolLister.stale`,
shown in ``/readyz``). Refreshes run in the owner's task group (:class:`~.servers.McpServers`),
at most one per server at a time; one is also started as soon as a session opens.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from ankka.runtime.features.mcp.connection import CallFailed, Listed, McpConnection

__all__ = ["GRACE", "ToolLister"]

log = logging.getLogger("ankka.runtime.mcp")

GRACE = 0.5
"""Seconds a turn waits for the refresh it started before serving the last good listing."""

C = TypeVar("C")
Group = Callable[[], "asyncio.TaskGroup | None"]


class ToolLister(Generic[C]):
    """The last good listing of ``connection``, compiled by ``compile`` (once per refresh, in
    a worker thread)."""

    def __init__(
        self,
        connection: McpConnection,
        compile: Callable[[Listed], C],
        group: Group,
        *,
        grace: float = GRACE,
    ) -> None:
        self._connection = connection
        self._compile = compile
        self._group = group
        self._grace = grace
        self._last: C | None = None
        self._refresh: asyncio.Task[None] | None = None
        self._done = asyncio.Event()
        self._since = 0.0  # when the refresh under way started (the loop's clock)
        self.stale: str | None = None
        """Why the last refresh failed, while the listing served is an older one."""

    @property
    def refreshing(self) -> bool:
        return self._refresh is not None and not self._refresh.done()

    def kick(self) -> bool:
        """Start a refresh in the owner's task group unless one is under way; False when
        the owner has no task group (it is not entered): nothing was started."""
        if self.refreshing:
            return True
        group = self._group()
        if group is None:
            return False
        self._done = asyncio.Event()
        self._since = asyncio.get_running_loop().time()
        name = f"mcp-list:{self._connection.name}"
        self._refresh = group.create_task(self._run(self._done), name=name)
        return True

    def late(self) -> float | None:
        """Seconds the refresh under way has taken, once past the grace; else None."""
        if not self.refreshing:
            return None
        taken = asyncio.get_running_loop().time() - self._since
        return taken if taken > self._grace else None

    def cancel(self) -> None:
        """Stop a refresh under way (the owner is leaving)."""
        if self._refresh is not None:
            self._refresh.cancel()

    async def current(self) -> C:
        """The listing a turn offers now; :class:`CallFailed` when none ever came back."""
        running = self.refreshing
        if not self.kick():  # not in a task group (a one-off use): list here and now
            await self._run(asyncio.Event())
        elif self._last is None:
            done = self._done
            await done.wait()
        elif not running:
            done = self._done
            try:
                async with asyncio.timeout(self._grace):
                    await done.wait()
            except TimeoutError:
                pass
        if self._last is None:
            raise CallFailed(self.stale or f"MCP server {self._connection.name!r} listed nothing")
        return self._last

    async def _run(self, done: asyncio.Event) -> None:
        try:
            listed = await self._connection.list_tools()
            # Compiling schemas is CPU work: off the event loop, so turns go on meanwhile.
            self._last = await asyncio.to_thread(self._compile, listed)
            self.stale = None
        except CallFailed as failure:
            self.stale = str(failure)
            if self._last is not None:
                log.warning(
                    "MCP server %r: serving its last good listing: %s",
                    self._connection.name,
                    failure,
                )
        except Exception as exc:  # a fault of ours: logged, and the last listing stays
            log.exception("listing the tools of MCP server %r failed", self._connection.name)
            self.stale = f"listing failed: {type(exc).__name__}"
        finally:
            done.set()
