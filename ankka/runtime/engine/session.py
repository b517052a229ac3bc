"""A session's state as the engine reads it: the journal's fold, cached.

:class:`SessionState` is a session as of a journal position: what the model is sent from it
(the compaction fold, :class:`~ankka.runtime.engine.view.SentView`), the digest of the last
MCP tool listing recorded per server, who opened it, and its approvals' fold.
:class:`SessionCache` keeps those by session and brings one up to date by reading only the
events after its position, so a turn costs one small read, however long the session. It is
bounded by sessions and by the bytes their folds hold (an estimate, :attr:`SessionState.footprint`),
so a few long sessions cannot fill memory any more than many short ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ankka.runtime.engine.approval_state import ApprovalState
from ankka.runtime.engine.lru import DEFAULT_CACHE_BYTES, WeighedLRU
from ankka.runtime.engine.view import SentView
from ankka.runtime.records.iterations import IterationCompleted, iteration_of
from ankka.runtime.records.mcp import McpToolsChanged, McpToolsRecord
from ankka.runtime.records.messages import (
    MESSAGE_OVERHEAD,
    RECORDED_MESSAGES,
    AssistantMessage,
    Usage,
)
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

    @property
    def footprint(self) -> int:
        """An estimate of the bytes this state holds: its fold, and its approvals (each
        request and decision about a message's worth, its suspended turn's messages too)."""
        approvals = len(self.approvals.requested) + len(self.approvals.decided)
        if self.approvals.current is not None:
            approvals += len(self.approvals.current.record.messages)
        return self.view.footprint + approvals * MESSAGE_OVERHEAD

    def add(self, seq: int, record: Record) -> None:
        if isinstance(record, RECORDED_MESSAGES):  # the commonest record, tested first
            if isinstance(record, AssistantMessage) and record.call is not None:
                number = iteration_of(record.turn)
                if number is not None:
                    self.iterations.setdefault(number, record.call.usage)
        elif isinstance(record, McpToolsRecord | McpToolsChanged):
            self.mcp_digests[record.server] = record.digest
        elif isinstance(record, SessionOpened):
            self.opened = record
        elif isinstance(record, IterationCompleted):
            self.iterations[record.number] = record.usage
        self.approvals.add(seq, record)
        self.view.add(seq, record)


class SessionCache:
    """Folded conversations by session, least recently used evicted past ``capacity``
    sessions or ``max_bytes`` of folds."""

    def __init__(
        self, journal: Journal, capacity: int, *, max_bytes: int = DEFAULT_CACHE_BYTES
    ) -> None:
        self._journal = journal
        self._cache: WeighedLRU[str, SessionState] = WeighedLRU(
            _footprint, entries=capacity, max_bytes=max_bytes
        )

    @property
    def bytes(self) -> int:
        """The estimated bytes of the folds held now."""
        return self._cache.bytes

    async def load(self, session: str) -> SessionState:
        folded = self._cache.pop(session) or SessionState()
        for entry in await self._journal.read(session, after=folded.position):
            folded.add(entry.seq, entry.record)
        self._remember(session, folded)
        return folded

    def _remember(self, session: str, folded: SessionState) -> None:
        self._cache.put(session, folded)

    def remember(self, session: str, folded: SessionState) -> None:
        """Keep ``folded`` (brought up to date by its writer) as the session's fold."""
        self._remember(session, folded)

    def forget(self, session: str) -> None:
        self._cache.pop(session)


def _footprint(state: SessionState) -> int:
    return state.footprint
