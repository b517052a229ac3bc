"""The narrow adapter between the A2A layer and the runtime: the one module here that imports
the runtime's own parts.

What A2A needs of the runtime, and nothing more: run a turn in a session (with a turn id of
A2A's choosing) and read back a turn the journal holds; create, read, list, cancel and follow
an autonomous agent's task; list and decide pending approvals; ask the session policy. When
the runtime's rooms move, this file follows them and the rest of the package stays as it is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from ankka._kernel.errors import AnkkaError, Refused
from ankka.runtime.declare.policy import Right
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.drivers.tasks.host import TaskHost
from ankka.runtime.drivers.tasks.notify import Subscription
from ankka.runtime.engine.approval_state import ApprovalState
from ankka.runtime.engine.executor import LoopEvent
from ankka.runtime.engine.loop import TurnOutcome
from ankka.runtime.providers.base import TextDelta
from ankka.runtime.records.approvals import ApprovalRequest, TurnEnded, TurnSuspended
from ankka.runtime.records.messages import AssistantMessage
from ankka.runtime.records.session import opened_by
from ankka.runtime.records.tasks import TaskRecord, TaskSpec, TaskState
from ankka.runtime.store.readable import Readers, clause, readers
from ankka.runtime.store.tasks import TASK_COLUMNS, Transaction, task_from_row

__all__ = [
    "AgentInfo",
    "RuntimePort",
    "TaskEnd",
    "TurnEnd",
]

Kind = Literal["request", "autonomous"]


@dataclass(frozen=True, slots=True)
class AgentInfo:
    """What a card says of an agent: its name, description, kind, and (autonomous) the task
    types it accepts with their descriptions and result schemas."""

    name: str
    description: str
    kind: Kind
    streams: bool = False
    task_types: tuple[tuple[str, str, dict[str, Any]], ...] = ()


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """How a turn stands: ``completed`` (``reply``), ``failed``/``rejected`` (``reason``), or
    ``input-required`` (the ``approvals`` it waits for, as the runtime's API shows them)."""

    state: str
    reply: object = None
    reason: str = ""
    approvals: tuple[dict[str, Any], ...] = ()


def _shown(requests: tuple[ApprovalRequest, ...]) -> tuple[dict[str, Any], ...]:
    return tuple(r.shown() for r in requests)


def _reply(outcome: TurnOutcome) -> object:
    value = outcome.value
    return value.model_dump(mode="json") if value is not None else outcome.text


@dataclass(frozen=True, slots=True)
class TaskEnd:
    """An autonomous agent's task as A2A shows it, with the approvals it waits for."""

    record: TaskRecord
    approvals: tuple[dict[str, Any], ...] = field(default_factory=tuple)


_EMIT = Callable[[str], Awaitable[None]]


class RuntimePort:
    """The runtime (request turns, approvals, policy) and its task host, as A2A uses them."""

    def __init__(self, runtime: Runtime, tasks: TaskHost | None) -> None:
        self.runtime = runtime
        self.tasks = tasks

    # -- agents ---------------------------------------------------------------------------

    def agents(self) -> dict[str, AgentInfo]:
        service = self.runtime.service
        found: dict[str, AgentInfo] = {}
        for name, declared in service.agents.items():
            found[name] = AgentInfo(name, declared.description or name, "request", streams=True)
        if self.tasks is not None:
            for name, auto in service.autonomous_agents.items():
                types = tuple(
                    (
                        a.task_type.name,
                        a.task_type.description,
                        a.task_type.result.model_json_schema(),
                    )
                    for a in auto.accepts
                )
                found[name] = AgentInfo(name, auto.description or name, "autonomous", True, types)
        return found

    def allows(self, caller: str, right: Right, *, creator: str | None, agent: str) -> bool:
        return self.runtime.policy.allows(caller, right, creator=creator, agent=agent)

    def readers(self, caller: str) -> Readers:
        """Whose rows ``caller`` may read, as a store query's condition takes it."""
        return readers(self.runtime.policy, caller)

    # -- request agents ---------------------------------------------------------------------

    async def run_turn(
        self,
        agent: str,
        session: str,
        text: str,
        *,
        caller: str,
        turn_id: str,
        on_text: _EMIT | None = None,
    ) -> TurnEnd:
        """Run one turn; a failure the runtime names is a failed (or, refused by a guardrail,
        rejected) turn, not an error of the call."""
        planned = self.runtime.plan(agent, session, text)

        async def emit(event: LoopEvent) -> None:
            if on_text is not None and isinstance(event, TextDelta) and event.text:
                await on_text(event.text)

        try:
            result = await self.runtime.run(
                planned, caller=caller, turn_id=turn_id, emit=emit if on_text else None
            )
        except Refused as exc:
            return TurnEnd("rejected", reason=str(exc))
        except AnkkaError as exc:
            if exc.status in (403, 404, 409, 422, 400):
                raise
            return TurnEnd("failed", reason=f"{exc.kind}: {exc}")
        if result.outcome is None:
            return TurnEnd("input-required", approvals=_shown(result.awaiting))
        return TurnEnd("completed", reply=_reply(result.outcome))

    async def recorded_turn(self, session: str, turn_id: str) -> TurnEnd | None:
        """The turn ``turn_id`` as the session's journal holds it; None when nothing of it
        was committed (it may be run)."""
        entries = await self.runtime.context.journal.read(session)
        state = ApprovalState()
        reply: object = None
        seen = False
        ended: TurnEnded | None = None
        for entry in entries:
            record = entry.record
            state.add(entry.seq, record)
            if getattr(record, "turn", None) != turn_id:
                continue
            if isinstance(record, AssistantMessage):
                seen = True
                if record.content is not None and not record.tool_calls:
                    reply = record.content
            elif isinstance(record, TurnEnded):
                ended = record
            elif isinstance(record, TurnSuspended):
                seen = True
        current = state.current
        if current is not None and current.turn == turn_id and current.undecided:
            return TurnEnd("input-required", approvals=_shown(current.undecided))
        if ended is not None:
            return TurnEnd("failed", reason=f"{ended.cause}: {ended.reason}")
        if seen and reply is not None:
            return TurnEnd("completed", reply=reply)
        return None

    async def decide(
        self,
        approval: str,
        decision: Literal["approved", "refused"],
        digest: str | None,
        *,
        reason: str,
        caller: str,
    ) -> TurnEnd | None:
        """Record a decision; the turn as it then stands (None: a task's, whose instance goes
        on by itself)."""
        decided = await self.runtime.approvals.decide(
            approval, decision, digest, reason=reason, decided_by=caller, caller=caller
        )
        if decided.status == "resumed":
            return None
        if decided.status in ("recorded", "awaiting_approval"):
            return TurnEnd("input-required", approvals=_shown(decided.pending))
        if decided.outcome is not None:
            return TurnEnd("completed", reply=_reply(decided.outcome))
        return TurnEnd("failed", reason=decided.reason or decided.status)

    async def pending_approvals(self, session: str) -> tuple[dict[str, Any], ...]:
        """The undecided requests of ``session``'s suspended turn (a task's: ``task:ID``)."""
        entries = await self.runtime.context.journal.read(session)
        state = ApprovalState()
        for entry in entries:
            state.add(entry.seq, entry.record)
        current = state.current
        return _shown(current.undecided) if current is not None else ()

    async def session_creator(self, session: str) -> str | None:
        opened = opened_by(e.record for e in await self.runtime.context.journal.read(session))
        return opened.caller if opened is not None else None

    # -- autonomous agents --------------------------------------------------------------------

    def _host(self) -> TaskHost:
        if self.tasks is None:
            raise RuntimeError("this runtime serves no autonomous agents")
        return self.tasks

    async def put_task(
        self, agent: str, task: str, task_type: str, instructions: str, *, caller: str
    ) -> TaskRecord:
        spec = TaskSpec(agent, task_type, instructions, (), ())
        record, _ = await self._host().put(agent, task, spec, instance=None, created_by=caller)
        return record

    async def task(self, task: str) -> TaskEnd:
        record = await self._host().get(task)
        approvals: tuple[dict[str, Any], ...] = ()
        if record.state == TaskState.AWAITING_APPROVAL:
            approvals = await self.pending_approvals(f"task:{task}")
        return TaskEnd(record, approvals)

    async def cancel_task(self, task: str) -> TaskRecord:
        return await self._host().cancel(task)

    async def wait_task(self, task: str, seconds: float) -> TaskRecord:
        return await self._host().wait(task, seconds)

    async def task_page(
        self, agent: str, *, before: tuple[str, str] | None, limit: int, caller: str
    ) -> list[TaskRecord]:
        """``agent``'s tasks ``caller`` may read (in the query), most recently updated first,
        after the cursor ``before``."""
        readable, params = clause(self.readers(caller), "created_by", "agent")
        where = ["agent = ?", readable]
        params.insert(0, agent)
        if before is not None:
            where.append("(updated_at < ? OR (updated_at = ? AND id < ?))")
            params += [before[0], before[0], before[1]]
        sql = (
            f"SELECT {TASK_COLUMNS} FROM ankka_tasks WHERE {' AND '.join(where)} "
            f"ORDER BY updated_at DESC, id DESC LIMIT {int(limit)}"
        )

        def work(tx: Transaction) -> list[TaskRecord]:
            return [task_from_row(r) for r in tx.rows(sql, params)]

        records: list[TaskRecord] = await self._host().store.read(work)
        return records

    @contextlib.contextmanager
    def follow(self, task: str) -> Iterator[Subscription]:
        """This process's live notifications of ``task`` (what wakes a follower; the record is
        what it reports)."""
        host = self._host()
        subscription = host.notifier.add(("task", task))
        try:
            yield subscription
        finally:
            host.notifier.remove(("task", task), subscription)
