"""A session's state as the engine reads it: the journal's fold, cached.

:class:`SessionState` is a session as of a journal position: what the model is sent from it
(the compaction fold, :class:`~ankka.runtime.engine.view.SentView`), the digest of the last
MCP tool listing recorded per server, who opened it, and its approvals' fold.
:class:`SessionCache` keeps those by session and brings one up to date by reading only the
events after its position, so a turn costs one small read, however long the session.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from ankka.runtime.engine.approval_state import ApprovalState
from ankka.runtime.engine.view import SentView
from ankka.runtime.records.iterations import IterationCompleted, iteration_of
from ankka.runtime.records.mcp import McpToolsRecord
from ankka.runtime.records.messages import AssistantMessage, Usage
from ankka.runtime.records.registry import Record
from ankka.runtime.records.session import SessionOpened
from ankka.runtime.store.journal import Journal

__all__ = ["SessionCache", "SessionState"]


@dataclass(slots=True)
class SessionState:
    """A session as of ``position``: what the model is sent from it (the compaction fold),
    the digest of the last MCP tool listing recorded per server (so an unchanged listing is
    recorded as its digest alone), who opened it, its approvals, and (a task's session) the
    usage of each iteration recorded as completed: from its mark, or, in a session recorded
    before the marks, from its response's model call."""

    view: SentView = field(default_factory=SentView)
    mcp_digests: dict[str, str] = field(default_factory=dict)
    opened: SessionOpened | None = None
    approvals: ApprovalState = field(default_factory=ApprovalState)
    iterations: dict[int, Usage] = field(default_factory=dict)

    @property
    def position(self) -> int:
        return self.view.position

    def add(self, seq: int, record: Record) -> None:
        if isinstance(record, McpToolsRecord):
            self.mcp_digests[record.server] = record.digest
        elif isinstance(record, SessionOpened):
            self.opened = record
        elif isinstance(record, IterationCompleted):
            self.iterations[record.number] = record.usage
        elif isinstance(record, AssistantMessage) and record.call is not None:
            number = iteration_of(record.turn)
            if number is not None:
                self.iterations.setdefault(number, record.call.usage)
        self.approvals.add(seq, record)
        self.view.add(seq, record)


class SessionCache:
    """Folded conversations by session, least recently used evicted past ``capacity``."""

    def __init__(self, journal: Journal, capacity: int) -> None:
        self._journal = journal
        self._capacity = capacity
        self._cache: OrderedDict[str, SessionState] = OrderedDict()

    async def load(self, session: str) -> SessionState:
        folded = self._cache.pop(session, None) or SessionState()
        for entry in await self._journal.read(session, after=folded.position):
            folded.add(entry.seq, entry.record)
        self._remember(session, folded)
        return folded

    def _remember(self, session: str, folded: SessionState) -> None:
        self._cache[session] = folded
        self._cache.move_to_end(session)
        while len(self._cache) > self._capacity:
            self._cache.popitem(last=False)

    def remember(self, session: str, folded: SessionState) -> None:
        """Keep ``folded`` (brought up to date by its writer) as the session's fold."""
        self._remember(session, folded)

    def forget(self, session: str) -> None:
        self._cache.pop(session, None)
