"""Requests a server sends during a tool call, routed to the turn that made the call.

A server may ask its client something while it answers ``tools/call``: a person's answer to a
form (``elicitation/create``) or a model's completion (``sampling/createMessage``). The SDK
hands such a request to one callback per session, with nothing naming the call it belongs to
(the protocol's client side carries no link), so each call registers the turn's
:class:`Asker` on its connection while it is in flight (:class:`InFlight`), and the
connection's callbacks give the request to it:

- exactly one call in flight on the session: that call's turn is asked;
- none, or several (even of one turn: the question names its call, and holds that call's
  deadline open): nobody can tell which call asked, so an elicitation is answered
  ``cancel`` and a sampling request refused, each logged.

The turn's asker is set by its driver with :func:`asking` (in :data:`ASKING`, a context
variable: the call runs in the turn's task, so :class:`~.servers.McpTool` reads it there).
Every driver (a request turn, an approval's resumed turn, a task's iteration) goes through
that one function, and so every kind of turn closes the questions it leaves unanswered as it
ends, however it ends (:meth:`Asker.close`: ended, failed, cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ankka._kernel.errors import AnkkaError
from ankka.runtime.engine.executor import Ledger
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.records.registry import Record
from ankka.runtime.records.session import SessionOpened

__all__ = [
    "ASKING",
    "Answer",
    "Asker",
    "Askers",
    "InFlight",
    "Question",
    "Sampled",
    "asking",
]

log = logging.getLogger("ankka.runtime.mcp")

Action = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True, slots=True)
class Question:
    """A server's form: asked during the call ``call_id`` of the offered tool ``tool``."""

    server: str
    tool: str
    call_id: str
    message: str
    schema: dict[str, Any]
    timeout: float


@dataclass(frozen=True, slots=True)
class Answer:
    """What goes back to the server: ``content`` only with ``accept``."""

    action: Action
    content: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Sampled:
    """A model's completion for a server (None ``text``: refused, ``why``)."""

    text: str | None
    model: str = ""
    stop_reason: str = "endTurn"
    why: str = ""


class Asker(Protocol):
    """A turn's answers to what its calls' servers ask; ``records``: what it keeps for the
    turn's batch."""

    records: list[Record]

    async def elicit(self, question: Question) -> Answer: ...

    async def sample(
        self, server: str, system: str | None, messages: list[tuple[str, str]], max_tokens: int
    ) -> Sampled: ...

    async def close(self, reason: str) -> None:
        """The turn ended: its questions still waiting are closed, with ``reason``."""
        ...


class Askers(Protocol):
    """Where a turn's asker comes from (the runtime's desk)."""

    def for_turn(
        self,
        session: str,
        agent: str,
        turn: str,
        position: int,
        opened: SessionOpened | None,
        provider: ModelProvider,
        ledger: Ledger,
    ) -> Asker: ...

    async def recover(self) -> None:
        """At start: close the questions asked before the runtime stopped."""
        ...


ASKING: ContextVar[Asker | None] = ContextVar("ankka_mcp_asking", default=None)


@contextlib.asynccontextmanager
async def asking(asker: Asker | None) -> AsyncIterator[None]:
    """The turn's calls ask ``asker`` (set in the turn's task, read by its MCP calls); as the
    turn leaves, the questions it left unanswered are closed with why it ended: the one path
    of every driver. A cancelled turn closes them shielded (a stream's caller leaving, or a
    drain, may cancel it again while it does)."""
    token = ASKING.set(asker)
    try:
        yield
    except asyncio.CancelledError:
        if asker is not None:
            await _close(asker, "the turn that asked was cancelled before it was answered", True)
        raise
    except BaseException as exc:
        if asker is not None:
            kind = exc.kind if isinstance(exc, AnkkaError) else type(exc).__name__
            await _close(asker, f"the turn that asked failed ({kind}) before it was answered")
        raise
    else:
        if asker is not None:
            await asker.close("the turn that asked ended before it was answered")
    finally:
        ASKING.reset(token)


async def _close(asker: Asker, reason: str, shielded: bool = False) -> None:
    """Close a failed or cancelled turn's questions; a failure to is logged, never raised
    over the turn's own."""
    try:
        if shielded:
            await asyncio.shield(asker.close(reason))
        else:
            await asker.close(reason)
    except Exception:
        log.warning("the questions of an ended turn were not closed", exc_info=True)


@dataclass(slots=True)
class Call:
    """One call in flight: its turn's asker, its tool, and its deadline, which measures the
    server only: it stops while a person answers the server's question (:meth:`hold`) and
    goes on with what was left of it once they have (:meth:`release`)."""

    asker: Asker
    tool: str
    call_id: str
    deadline: asyncio.Timeout | None = None
    holds: int = 0  # questions of this call waiting now
    left: float | None = None  # seconds of the deadline left when the first began to wait

    def hold(self) -> None:
        deadline = self.deadline
        if deadline is None:
            return
        if self.holds == 0:
            when = deadline.when()
            now = asyncio.get_running_loop().time()
            self.left = max(0.0, when - now) if when is not None else None
            with contextlib.suppress(RuntimeError):  # the call ended meanwhile
                deadline.reschedule(None)
        self.holds += 1

    def release(self) -> None:
        deadline = self.deadline
        if deadline is None or self.holds == 0:
            return
        self.holds -= 1
        if self.holds == 0 and self.left is not None:
            now = asyncio.get_running_loop().time()
            # The call may have ended meanwhile (its turn cancelled), its deadline with it.
            with contextlib.suppress(RuntimeError):
                deadline.reschedule(now + self.left)


@dataclass(slots=True)
class InFlight:
    """The calls in flight on one server's session."""

    calls: list[Call] = field(default_factory=list)

    def only(self) -> Call | None:
        """The one call that may have asked, or None: no call, or several (of one turn or of
        several), for the question names its call's tool and id and holds that call's
        deadline open, and nothing says which of several asked."""
        return self.calls[0] if len(self.calls) == 1 else None
