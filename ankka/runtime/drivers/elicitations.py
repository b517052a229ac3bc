"""A server's questions during a call, as pending decisions; and its sampling requests.

An MCP server may ask, while it answers a tool call, for a person's answer to a form
(``elicitation/create``). The call stays open (its time stops) while the question waits
as a **pending decision exactly like a tool approval**: an index row (id ``eli_...``) with its
expiry, a digest over (the offered tool, the canonical JSON of ``{"message",
"requestedSchema"}``, the call id, the journal position the turn started at), listed with
``GET /v1/approvals`` and heard as ``approval_requested``. ``POST /v1/approvals/{id}``
answers it: ``approve`` (with ``content``, checked against the requested schema, the
schema's defaults for fields left out) is sent as ``accept``, ``refuse`` as ``decline``, and
an expiry as ``cancel``. The first decision wins (a second is 409 naming it); the answer goes
to the server once, and the question and its answer are journaled as
:class:`~ankka.runtime.records.approvals.ElicitationAnswered` with the turn's records.

The turn's lock is held by the turn itself while it waits (the call is in flight), so the
decision is given to the waiting call in this process, not under that lock. A runtime that
stops while a question waits takes the call with it: the server's request ends with that
connection (the server sees its stream close, as for any client that goes away), the row is
ended at the next start (:meth:`ElicitationDesk.recover`), and a decision then is 409. A
turn that ends while its question waits (cancelled, failed, its call gone) closes it
(:meth:`ElicitationDesk.close`, through the one path of every driver,
:func:`~ankka.runtime.features.mcp.asking.asking`): decided ``ended`` by the platform with the
cause, journaled with the turn's records, the row closed, the server answered ``cancel``. A
task ended from outside through this process while its iteration waits here on a question
(cancelled, failed by its parent or its deadline) has it closed the same way
(:meth:`ElicitationDesk.end_task`), journaled in the task's session by the call that
waited. Ended through another process (a pod sharing the PostgreSQL store, which holds no
such question), the same: that process's end notice reaches this one through the store's
relay (:class:`~ankka.runtime.drivers.tasks.notify.Notifier`, LISTEN/NOTIFY, heard from the
task host's start), and the question is closed with the same reason (:func:`task_ended`;
a reason too long for a notice is cut, as every relayed text is).
The relay is live, not durable: an end told while this process's listening connection is
down is not heard; once the relay hears again, the task host reads the tasks of the questions
waiting here (:meth:`ElicitationDesk.asking_tasks`) and closes those of the tasks that ended
meanwhile the same way, with the same reason.

A task shows ``awaiting-approval`` just before its question is registered here (the index row
is written between the two), and its call may still run after its task ended: an end told in
that gap finds no question to close. So the desk remembers the task sessions it was told
ended (:meth:`ElicitationDesk.end_task`; the newest :data:`ENDED_KEPT`, oldest forgotten
first), and a question registered for one of them is closed at once with that end's reason,
the same way (the server answered ``cancel``, the end journaled). Only task sessions
(``task:<id>``, which end once) are remembered, never a request session, whose turns reuse it.

Recovery at start reads the pending rows a page at a time (:data:`RECOVERY_PAGE`, after the
previous page's last row), so every question left pending is ended, however many rows wait.

Sampling (``sampling/createMessage``) is served by :meth:`TurnAsker.sample` with the
turn's own model when the agent allows it for that server (``McpServer(..., sampling=True)``),
accounted in the turn's ledger and journaled as
:class:`~ankka.runtime.records.mcp.SampledCall`; otherwise refused.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ankka._kernel.errors import NotFound, RequestError
from ankka._kernel.ids import new_id
from ankka.runtime.declare.mcp import McpServer
from ankka.runtime.drivers.approval_errors import (
    ApprovalConflict,
    refuse_decided,
    refuse_digest,
)
from ankka.runtime.drivers.approvals import ApprovalDesk
from ankka.runtime.drivers.context import Context
from ankka.runtime.drivers.recovery import cause, turn_within
from ankka.runtime.engine.executor import Executor, Ledger
from ankka.runtime.engine.metrics import RuntimeMetrics
from ankka.runtime.features.mcp.asking import Answer, Question, Sampled
from ankka.runtime.features.mcp.elicitation import accepted
from ankka.runtime.providers.base import ModelProvider, ModelRequest
from ankka.runtime.records.approvals import (
    ApprovalDecided,
    ApprovalRequest,
    Decision,
    ElicitationAnswered,
    canonical_arguments,
    digest,
)
from ankka.runtime.records.mcp import SampledCall
from ankka.runtime.records.messages import AssistantMessage, Message, UserMessage
from ankka.runtime.records.registry import Record
from ankka.runtime.records.session import SessionOpened
from ankka.runtime.records.tasks import TASK_SESSION_PREFIX
from ankka.runtime.store.approval_index import IndexRow, cursor_of

__all__ = ["ELICITATION", "ElicitationDesk", "TurnAsker", "sampling_of", "task_ended"]

log = logging.getLogger("ankka.approvals")

ELICITATION = "eli_"  # the id prefix of a server's question
PLATFORM = "platform"
_ACTIONS = {"approved": "accept", "refused": "decline", "expired": "cancel", "ended": "cancel"}
_RECENT = 1024
ENDED_KEPT = 2048
"""Ended task sessions a desk remembers, with the reason (the newest; oldest forgotten
first): far more than the ends told while a question is being registered (one store round
trip). Each reason kept is cut to :data:`ENDED_REASON` characters, so the memory stays under
about 2.5 MB even when every reason is that long (a few hundred kilobytes typically)."""
ENDED_REASON = 1000
RECOVERY_PAGE = 500
"""Pending index rows read at once at start; recovery reads every page."""
RESTARTED = (
    "the runtime restarted before it was answered: its call, the server's request and the "
    "turn that asked ended with the process"
)
Recorder = Callable[[Sequence[Record]], Awaitable[None]]


@dataclass(slots=True)
class _Pending:
    request: ApprovalRequest
    server: str
    schema: dict[str, Any]
    session: str
    agent: str
    turn: str
    opened: SessionOpened | None
    answered: asyncio.Future[tuple[ApprovalDecided, dict[str, Any] | None]]
    kept: bool = False
    """Its end is journaled already (by the turn that closed it)."""


class ElicitationDesk:
    """The questions waiting in this process, by id."""

    def __init__(self, context: Context, approvals: ApprovalDesk) -> None:
        self._context = context
        self._approvals = approvals
        self._pending: dict[str, _Pending] = {}
        # Decided here lately: a second decision is answered with the first even before
        # the turn's batch journals it.
        self._recent: OrderedDict[str, ApprovalDecided] = OrderedDict()
        # Task sessions told ended, with the reason: a question registered after its task
        # ended is closed at once (bounded: ENDED_KEPT).
        self._ended: OrderedDict[str, str] = OrderedDict()

    def notify(self, event: str, data: dict[str, Any]) -> None:
        self._approvals.notify(event, data)

    def for_turn(
        self,
        session: str,
        agent: str,
        turn: str,
        position: int,
        opened: SessionOpened | None,
        provider: ModelProvider,
        ledger: Ledger,
    ) -> TurnAsker:
        """A request turn's asker: its records kept for the turn's batch."""
        declared = self._context.service.agents.get(agent)
        servers = declared.mcp_servers if declared is not None else ()
        return TurnAsker(
            self, session, agent, turn, position, opened, provider, ledger, sampling_of(servers)
        )

    @property
    def executor(self) -> Executor:
        return self._context.executor

    @property
    def metrics(self) -> RuntimeMetrics:
        return self._context.metrics

    def holds(self, approval: str) -> bool:
        return approval in self._pending

    async def listed(self, rows: Sequence[IndexRow], caller: str | None) -> list[dict[str, Any]]:
        """The rows as the API shows them: the journal's requests (a question's marked ``kind:
        elicitation``) and the questions waiting in this process, of sessions ``caller``
        (None: the platform) may read."""
        found = await self._approvals.shown(rows, caller)
        for item in found:
            if item["id"].startswith(ELICITATION):
                item["kind"] = "elicitation"
        listed = {item["id"] for item in found}
        for row in rows:
            pending = self._pending.get(row.id) if row.id not in listed else None
            if pending is None:
                continue
            if caller is None or self._context.allows(caller, "read", pending.opened):
                found.append(
                    {
                        **shown(pending.request),
                        "session": pending.session,
                        "agent": pending.agent,
                        "state": "pending",
                    }
                )
        return found

    async def ask(self, asker: TurnAsker, question: Question) -> Answer:
        """Wait for a person's answer (or the question's expiry): what the server is sent."""
        ctx = self._context
        index = ctx.approvals
        if index is None:
            log.warning(
                "MCP server %r asked a question; no approval index, answered cancel",
                question.server,
            )
            return Answer("cancel")
        now = ctx.clock.now()
        arguments = canonical_arguments(
            json.dumps({"message": question.message, "requestedSchema": question.schema})
        )
        approval = new_id("eli")
        request = ApprovalRequest(
            approval,
            question.call_id,
            question.tool,
            arguments,
            digest(question.tool, arguments, question.call_id, asker.position),
            now + timedelta(seconds=question.timeout),
        )
        loop = asyncio.get_running_loop()
        pending = _Pending(
            request,
            question.server,
            question.schema,
            asker.session,
            asker.agent,
            asker.turn,
            asker.opened,
            loop.create_future(),
        )
        if asker.waiting is not None:  # before it can be seen (a task awaits approval)
            await asker.waiting(True)
        try:
            await index.schedule(
                asker.session, asker.agent, [(approval, request.tool, request.expires_at)], now
            )
            self._pending[approval] = pending
            ended = self._ended.get(asker.session)  # told before it was registered
            if ended is not None:
                self._decide_ended(pending, ended)
                log.info(
                    "closed question %s of session %s at once: %s", approval, asker.session, ended
                )
            try:
                asker.tell("approval_requested", {"session": asker.session, **shown(request)})
                decided, content = await self._answer_of(pending, asker.turn, question.timeout)
            except asyncio.CancelledError:  # the server's request went (its call or session)
                if not pending.answered.done():
                    await self._end(asker, pending, "the call that asked ended unanswered")
                raise
            finally:
                self._pending.pop(approval, None)
            self._remember(decided)
            action = _ACTIONS[decided.decision]
            if not pending.kept:  # else journaled and settled as its turn ended
                answered = ElicitationAnswered(question.server, request, decided, action, content)
                await asker.keep(answered)
                await index.settle([approval], decided.decision, close=True)
        finally:
            if asker.waiting is not None:
                await asker.waiting(False)
        data = {"id": approval, "decision": decided.decision, "decided_by": decided.decided_by}
        asker.tell("approval_decided", {"session": asker.session, **data})
        return Answer(action, content if action == "accept" else None)  # type: ignore[arg-type]

    async def close(self, asker: TurnAsker, reason: str) -> None:
        """The turn of ``asker`` ended with questions still waiting (cancelled, failed, or its
        call gone): each is decided ``ended`` by the platform, with ``reason``, kept with the
        turn's records and closed in the index; the waiting call answers its server
        ``cancel``. A decision that comes later is refused naming it (409)."""
        waiting = [
            p
            for p in self._pending.values()
            if p.session == asker.session and p.turn == asker.turn and not p.answered.done()
        ]
        for pending in waiting:
            await self._end(asker, pending, reason)
        if waiting:
            log.info("closed %d question(s) of turn %s: %s", len(waiting), asker.turn, reason)

    def end_session(self, session: str, reason: str) -> int:
        """The work of ``session`` was ended from outside (a task cancelled, or failed by its
        parent's end or its deadline) while its call waits on a question: each is decided
        ``ended`` by the platform with ``reason``; the call that waited answers its server
        ``cancel`` and journals the end with the session's records. How many were ended."""
        waiting = [
            p for p in self._pending.values() if p.session == session and not p.answered.done()
        ]
        for pending in waiting:
            self._decide_ended(pending, reason)
        if waiting:
            log.info("closed %d question(s) of session %s: %s", len(waiting), session, reason)
        return len(waiting)

    def asking_tasks(self) -> list[str]:
        """The tasks whose calls wait on a question here, unanswered."""
        prefix = TASK_SESSION_PREFIX
        sessions = {p.session for p in self._pending.values() if not p.answered.done()}
        return sorted(s.removeprefix(prefix) for s in sessions if s.startswith(prefix))

    def end_task(self, task: str, state: str, reason: str | None) -> int:
        """Task ``task`` ended (``state``, with ``reason``), in this process or another one:
        the questions its call waits on here are ended (:meth:`end_session`) saying so
        (:func:`task_ended`), and a question its call registers later is closed at once with
        the same reason (the session remembered, among the newest :data:`ENDED_KEPT`). How
        many were ended."""
        session, why = f"{TASK_SESSION_PREFIX}{task}", task_ended(state, reason)
        kept = why if len(why) <= ENDED_REASON else why[:ENDED_REASON] + "…"
        self._ended.setdefault(session, kept)  # a task ends once: its first reason holds
        self._ended.move_to_end(session)
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)
        return self.end_session(session, why)

    def _decide_ended(self, pending: _Pending, reason: str) -> ApprovalDecided:
        request = pending.request
        ended = ApprovalDecided(
            request.id, pending.turn, "ended", reason, PLATFORM, self._context.clock.now()
        )
        pending.answered.set_result((ended, None))
        self._remember(ended)
        return ended

    async def _end(self, asker: TurnAsker, pending: _Pending, reason: str) -> None:
        request = pending.request
        ended = self._decide_ended(pending, reason)
        pending.kept = True
        await asker.keep(ElicitationAnswered(pending.server, request, ended, "cancel", None))
        index = self._context.approvals
        if index is not None:
            await index.settle([request.id], "ended", close=True)

    def _remember(self, decided: ApprovalDecided) -> None:
        self._recent[decided.approval] = decided
        while len(self._recent) > _RECENT:
            self._recent.popitem(last=False)

    async def _answer_of(
        self, pending: _Pending, turn: str, seconds: float
    ) -> tuple[ApprovalDecided, dict[str, Any] | None]:
        """The person's decision, or the platform's expiry (itself the first decision, so
        one that comes later is refused naming it)."""
        try:
            async with asyncio.timeout(seconds):
                return await asyncio.shield(pending.answered)
        except TimeoutError:
            if pending.answered.done():  # decided as the limit passed: that decision holds
                return pending.answered.result()
            now = self._context.clock.now()
            expired = ApprovalDecided(
                pending.request.id, turn, "expired", "no one answered in time", PLATFORM, now
            )
            pending.answered.set_result((expired, None))
            return expired, None

    async def answer(
        self,
        approval: str,
        decision: Decision,
        given_digest: str | None,
        *,
        content: dict[str, Any] | None,
        reason: str,
        decided_by: str,
        caller: str | None,
    ) -> ApprovalDecided:
        """Give a person's decision to the waiting call (the first decision wins)."""
        pending = self._pending.get(approval)
        if pending is None:
            raise await self._not_waiting(approval)
        ctx = self._context
        if caller is not None:
            ctx.check(pending.session, caller, "decide", pending.opened)
        if pending.answered.done():
            refuse_decided(approval, pending.answered.result()[0])
        refuse_digest(approval, pending.request, given_digest)
        sent: dict[str, Any] | None = None
        if decision == "approved":
            sent = accepted(pending.schema, content or {})
        elif content:
            raise RequestError(f"approval {approval!r}: content goes only with approve")
        record = ApprovalDecided(
            approval, pending.turn, decision, reason, decided_by, ctx.clock.now()
        )
        pending.answered.set_result((record, sent))
        return record

    async def _not_waiting(self, approval: str) -> Exception:
        """Why a question is not waiting here: decided (409 naming it), gone, or unknown."""
        refuse_decided(approval, self._recent.get(approval))
        ctx = self._context
        row = await ctx.approvals.get(approval) if ctx.approvals is not None else None
        if row is None:
            return NotFound(f"there is no approval {approval!r}")
        folded = await ctx.sessions.load(row.session)
        try:
            refuse_decided(approval, folded.approvals.decided.get(approval))
        except ApprovalConflict as exc:
            return exc
        return ApprovalConflict(
            f"approval {approval!r} is a server's question whose call is no longer in flight "
            "(its runtime stopped, or another runtime holds it); the server's request ended "
            "with that call's connection, so there is nothing to answer"
        )

    async def recover(self) -> None:
        """At start (before the approvals' own recovery, which would end the rows without
        a word): every question still pending was asked by a call no process holds any more
        unless its session's turn lock is held (a turn in flight in another runtime). A
        request turn's is decided ``ended`` by the platform, saying the runtime restarted,
        and journaled in its session under that lock (the turn's batch, which held its
        question, went with the process, so only what its row knows is kept: the tool, the
        expiry); a task's row is ended (the task's resumed call asks again). The MCP session
        that carried it cannot be resumed: the SDK's session, the call's request id and the
        turn waiting on its result lived in the process, and Streamable HTTP's redelivery
        (``Last-Event-ID``, a server's MAY in 2025-11-25) replays a stream of the same
        session only.

        Every pending row is read, :data:`RECOVERY_PAGE` at a time, each page after the
        previous one's last row (oldest first). Each row is recovered alone: a session's lock
        is waited for a bounded time (:func:`~.recovery.turn_within`), and a row that cannot
        be ended in its session is closed ``ended`` in the index and logged by its ids, the
        others going on."""
        index = self._context.approvals
        if index is None:
            return
        ended, after = 0, None
        while True:  # every pending row, a page at a time (a tool approval's rows too)
            rows = await index.find(state="pending", limit=RECOVERY_PAGE, after=after)
            gone = [r for r in rows if r.id.startswith(ELICITATION) and r.id not in self._pending]
            for row in gone:
                try:
                    if row.session.startswith(TASK_SESSION_PREFIX):
                        await index.settle([row.id], "ended", close=True)
                        ended += 1
                    elif await self._restarted(row):
                        ended += 1
                except Exception as exc:  # one row stops neither the start nor the others
                    await self._unrecovered(row, exc)
            if len(rows) < RECOVERY_PAGE:
                break
            after = cursor_of(rows[-1])
        if ended:
            log.warning("ended %d server question(s) asked before the runtime stopped", ended)

    async def _restarted(self, row: IndexRow) -> bool:
        """End a request turn's question asked before a restart (False: a turn holds its
        session now, so a live runtime holds the question)."""
        ctx, index = self._context, self._context.approvals
        assert index is not None
        async with turn_within(ctx.queue, row.session) as held:
            if not held:
                log.info("server question %s: its session's turn is in flight elsewhere", row.id)
                return False
            folded = await ctx.sessions.load(row.session)
            if row.id not in folded.approvals.decided:
                request = ApprovalRequest(row.id, "", row.tool, "{}", "", row.expires_at)
                ended = ApprovalDecided(row.id, "", "ended", RESTARTED, PLATFORM, ctx.clock.now())
                server = row.tool.split("__")[1] if row.tool.count("__") >= 2 else ""
                answered = ElicitationAnswered(server, request, ended, "cancel", None)
                await ctx.record(row.session, folded, (answered,))
            await index.settle([row.id], "ended", close=True)
            return True

    async def _unrecovered(self, row: IndexRow, exc: Exception) -> None:
        """A question that could not be ended in its session at start (its journal
        unreadable, the store refusing the write): its row is closed, ``ended``, if the store
        takes that, so it is never pending again (its call is gone, whatever the failure);
        logged by ids and the failure's kind only."""
        index = self._context.approvals
        assert index is not None
        try:
            await index.settle([row.id], "ended", close=True)
        except Exception as again:
            log.warning(
                "server question %s of session %s was not ended at start (%s), nor its row "
                "closed (%s): it stays pending until the next start tries again",
                row.id,
                row.session,
                cause(exc),
                cause(again),
            )
            return
        log.warning(
            "server question %s of session %s could not be journaled as ended at start (%s): "
            "its row is closed, ended, so it is no longer pending",
            row.id,
            row.session,
            cause(exc),
        )


def task_ended(state: str, reason: str | None) -> str:
    """Why a task's question is closed when the task ends before it is answered: one wording,
    whichever process ended the task."""
    why = state
    if reason and reason != why:
        why += f": {reason}"
    return f"the task that asked ended ({why}) before it was answered"


def shown(request: ApprovalRequest) -> dict[str, Any]:
    """A question as the API shows it: the request's fields and ``kind: elicitation``."""
    return {**request.shown(), "kind": "elicitation"}


MOST_SAMPLES = 8
"""Sampling requests one turn serves: a server asking again and again within one call is
refused after these, so a tool call cannot make model calls without bound."""


@dataclass(slots=True)
class TurnAsker:
    """One turn's answers to what its calls' servers ask. ``record``: how its records are
    journaled at once (a task's append); None keeps them for the turn's batch
    (:attr:`records`)."""

    desk: ElicitationDesk
    session: str
    agent: str
    turn: str
    position: int
    opened: SessionOpened | None
    provider: ModelProvider
    ledger: Ledger
    sampling: frozenset[str] = frozenset()
    record: Recorder | None = None
    records: list[Record] = field(default_factory=list)
    notify: Callable[[str, dict[str, Any]], None] | None = None
    """Who hears of the turn's questions (a task's subscribers); None: the approval desk's."""
    waiting: Callable[[bool], Awaitable[None]] | None = None
    """Told when a question starts and stops waiting (a task's state follows it)."""
    allowance: Callable[[], Awaitable[str | None]] | None = None
    """Why the turn may make no more model calls now (a task's spent token budget), or None;
    asked before each sampling call."""
    max_output_tokens: int | None = None
    """The most a sampling call may ask the model to write (the task type's bound)."""
    sampled: int = 0

    def tell(self, event: str, data: dict[str, Any]) -> None:
        if self.notify is not None:
            self.notify(event, data)
        else:
            self.desk.notify(event, {"agent": self.agent, **data})

    async def keep(self, record: Record) -> None:
        if self.record is None:
            self.records.append(record)
        else:
            await self.record((record,))

    async def elicit(self, question: Question) -> Answer:
        return await self.desk.ask(self, question)

    async def close(self, reason: str) -> None:
        """The turn ended: its questions still waiting are closed (see the desk's)."""
        await self.desk.close(self, reason)

    async def sample(
        self, server: str, system: str | None, messages: list[tuple[str, str]], max_tokens: int
    ) -> Sampled:
        """The turn's model completes the server's messages (no tools), when allowed."""
        if server not in self.sampling:
            log.info(
                "MCP server %r asked for sampling; agent %r does not allow it", server, self.agent
            )
            return Sampled(None, why="Sampling not supported")
        if self.sampled >= MOST_SAMPLES:
            return Sampled(None, why=f"at most {MOST_SAMPLES} sampling requests a turn")
        why = await self.allowance() if self.allowance is not None else None
        if why is not None:
            log.info("MCP server %r asked for sampling; agent %r: %s", server, self.agent, why)
            return Sampled(None, why=why)
        self.sampled += 1
        if self.max_output_tokens is not None:
            max_tokens = min(max_tokens, self.max_output_tokens)
        sent: list[Message] = []
        for role, text in messages:
            if role == "user":
                sent.append(UserMessage(text, self.agent, self.turn))
            else:
                sent.append(AssistantMessage(text, (), self.agent, self.turn))
        request = ModelRequest(system or "", tuple(sent), (), max_output_tokens=max_tokens)
        executor = self.desk.executor
        answer = await executor.call(
            self.provider, request, agent=self.agent, turn=self.turn, ledger=self.ledger
        )
        if answer.call is not None:
            await self.keep(SampledCall(self.turn, self.agent, server, answer.call))
            if self.record is not None:  # a task's, counted as made (a request turn's
                # calls are counted with the turn)
                self.desk.metrics.calls_made(self.agent, (answer.call,))
        model = answer.call.model if answer.call is not None else self.provider.model
        return Sampled(answer.content or "", model=model)


def sampling_of(servers: Sequence[McpServer]) -> frozenset[str]:
    """The servers an agent lets ask its model."""
    return frozenset(s.name for s in servers if s.sampling)
