"""A server's refreshed listing made ready for turns, and what a turn records of it.

:meth:`Compiler.compile` (run off the event loop by :mod:`.lister`, once per refresh) turns a
``tools/list`` answer into the tools a turn may offer: those :func:`~.listing.listed` keeps,
each with its argument check. A check is compiled once per schema (compiling a JSON Schema is
the costly part, so a listing that changes one tool compiles one), and a tool whose schema
JSON Schema refuses is left out. What a listing leaves out is logged and counted
(``ankka_mcp_tools_left_out_total``) when it differs from the last listing's, and kept for
``/readyz``.

:meth:`Compiler.record` is what a turn journals of the listing it used
(:mod:`ankka.runtime.records.mcp`): the digest alone when the session's last recorded
listing is this one; the changes since that one when this process still holds it (the last
:data:`KEPT_LISTINGS` of each server) and they are the smaller; else the whole listing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from ankka.runtime.features.mcp.connection import Listed
from ankka.runtime.features.mcp.listing import listed, shown_name
from ankka.runtime.features.mcp.metrics import McpMetrics
from ankka.runtime.features.mcp.results import ArgumentCheck
from ankka.runtime.records.mcp import (
    ListedTool,
    McpListingRecord,
    McpToolsChanged,
    McpToolsRecord,
    ToolListing,
    changes,
)

__all__ = ["KEPT_LISTINGS", "Compiled", "Compiler"]

log = logging.getLogger("ankka.runtime.mcp")

KEPT_LISTINGS = 4  # per server: the listings a session's last one is diffed against
KEPT_CHECKS = 4096  # compiled argument checks, by schema, across servers


@dataclass(frozen=True, slots=True)
class Compiled:
    """A listing with each tool's argument check, and the tools the server listed that it
    leaves out (shown name → why)."""

    listing: ToolListing
    digest: str
    checks: Mapping[str, ArgumentCheck]
    left_out: Mapping[str, str]


class Compiler:
    def __init__(self, metrics: McpMetrics) -> None:
        self._metrics = metrics
        self._last: dict[str, Compiled] = {}
        self._listings: dict[str, OrderedDict[str, ToolListing]] = {}
        self._checks: OrderedDict[str, ArgumentCheck | str] = OrderedDict()
        self._lock = threading.Lock()  # compile runs in worker threads, one per server

    def last(self, server: str) -> Compiled | None:
        return self._last.get(server)

    def compile(self, server: str, raw: Listed) -> Compiled:
        listing, problems = listed(server, raw.tools)
        problems = {**raw.problems, **problems}
        checks: dict[str, ArgumentCheck] = {}
        kept: list[ListedTool] = []
        for tool in listing.tools:
            check = self._check(tool)
            if isinstance(check, str):
                problems[shown_name(tool.name)] = f"its input schema is invalid: {check}"
                continue
            checks[tool.name] = check
            kept.append(tool)
        if len(kept) != len(listing.tools):
            listing = ToolListing(server, tuple(kept))
        before = self._last.get(server)
        if before is None or before.left_out != problems:
            for name, why in problems.items():
                log.warning("MCP server %r: tool %s is left out: %s", server, name, why)
                self._metrics.tools_left_out.labels(server).inc()
        compiled = Compiled(listing, listing.digest, checks, problems)
        with self._lock:
            self._last[server] = compiled
            kept_listings = self._listings.setdefault(server, OrderedDict())
            kept_listings[listing.digest] = listing
            kept_listings.move_to_end(listing.digest)
            while len(kept_listings) > KEPT_LISTINGS:
                kept_listings.popitem(last=False)
        return compiled

    def _check(self, tool: ListedTool) -> ArgumentCheck | str:
        """The tool's argument check, or why its schema does not compile; once per schema."""
        text = json.dumps(tool.input_schema, sort_keys=True, separators=(",", ":"), default=str)
        key = hashlib.sha256(text.encode()).hexdigest()
        with self._lock:
            found = self._checks.get(key)
            if found is not None:
                self._checks.move_to_end(key)
                return found
        check = ArgumentCheck.compile(tool.input_schema)
        with self._lock:
            self._checks[key] = check
            while len(self._checks) > KEPT_CHECKS:
                self._checks.popitem(last=False)
        return check

    def record(
        self, agent: str, turn: str, listing: ToolListing, last: str | None
    ) -> McpListingRecord:
        """The digest alone, the changes since the session's last listing, or the whole."""
        server, digest = listing.server, listing.digest
        if last == digest:
            return McpToolsRecord(agent, turn, server, digest)
        with self._lock:
            base = self._listings.get(server, OrderedDict()).get(last or "")
        if base is not None:
            names, put = changes(base, listing)
            if len(put) * 2 < len(listing.tools):
                return McpToolsChanged(agent, turn, server, digest, base.digest, names, put)
        return McpToolsRecord(agent, turn, server, digest, listing.tools)
