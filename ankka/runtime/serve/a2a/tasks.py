"""An autonomous agent over A2A: a message creates one of its tasks.

The task's type is the message's ``metadata.taskType`` (or the request's), or the agent's only
type; its instructions are the message's text. Its id is derived from the agent, the caller
and the ``messageId``, and creating a task with an id and body already recorded changes
nothing, so a message sent again answers with the same task. The task's durable record is what
A2A reports: its state (``awaiting-approval`` is ``INPUT_REQUIRED``), its result (a JSON data
artifact), its reason. A follower (a stream, a subscription) is woken by this process's
notifications and reads the record, so it also sees what another process or a restart did.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)
from google.protobuf import json_format

from ankka._kernel.clock import Clock
from ankka._kernel.errors import NotFound
from ankka.runtime.records.tasks import TaskState
from ankka.runtime.serve.a2a.decisions import decisions_of
from ankka.runtime.serve.a2a.index import A2AIndex, TaskRow
from ankka.runtime.serve.a2a.live import Event
from ankka.runtime.serve.a2a.port import AgentInfo, RuntimePort, TaskEnd
from ankka.runtime.serve.a2a.turns import status_content
from ankka.runtime.serve.a2a.wire import (
    INTERRUPTED,
    Said,
    TaskView,
    artifact_event,
    derived_id,
    message_text,
    status_event,
    to_task,
)

__all__ = ["Tasks", "task_state"]

_STATES = {
    TaskState.PENDING: "submitted",
    TaskState.ASSIGNED: "submitted",
    TaskState.IN_PROGRESS: "working",
    TaskState.RESULT_REJECTED: "working",
    TaskState.AWAITING_APPROVAL: "input-required",
    TaskState.COMPLETED: "completed",
    TaskState.FAILED: "failed",
    TaskState.CANCELLED: "canceled",
}
POLL = 0.5  # a follower re-reads the record at least this often (other processes' changes)


def task_state(state: TaskState) -> str:
    return _STATES[state]


def task_view(end: TaskEnd, row: TaskRow | None) -> TaskView:
    record = end.record
    state = task_state(record.state)
    message_id = row.message_id if row is not None else f"{record.id}:request"
    return TaskView(
        record.id,
        row.context_id if row is not None else record.id,
        state,
        record.updated_at,
        status=status_content(state, record.reason or "", end.approvals),
        result=record.result if record.state == TaskState.COMPLETED else None,
        history=[Said("user", record.spec.instructions, message_id)],
        metadata={
            "ankka": {
                "agent": record.spec.agent,
                "taskType": record.spec.type,
                "iterations": {"used": record.iterations_used, "budget": record.budget},
                "usage": record.usage.as_dict(),
            }
        },
    )


def _task_type(agent: AgentInfo, message: pb.Message, request: pb.SendMessageRequest) -> str:
    for metadata in (message.metadata, request.metadata):
        given = json_format.MessageToDict(metadata).get("taskType")
        if given is not None:
            return str(given)
    if len(agent.task_types) == 1:
        return agent.task_types[0][0]
    names = ", ".join(t[0] for t in agent.task_types)
    raise InvalidParamsError(
        message=f"agent {agent.name!r} accepts several task types ({names}): name one in the "
        'message metadata, "taskType"'
    )


class Tasks:
    """The autonomous agents' side of the handler."""

    def __init__(self, port: RuntimePort, index: A2AIndex, clock: Clock) -> None:
        self.port = port
        self.index = index
        self.clock = clock

    async def start(
        self, agent: AgentInfo, request: pb.SendMessageRequest, caller: str
    ) -> TaskView:
        """The message's task: made now, or, for a ``messageId`` sent before, the task it made
        then (whatever this message says: a message id names one message)."""
        message = request.message
        task = derived_id("a2a", agent.name, caller, message.message_id)
        there = await self.index.get(task)
        if there is not None:
            with contextlib.suppress(NotFound):
                return task_view(await self.port.task(task), there)
        text = message_text(message)
        task_type = _task_type(agent, message, request)
        context = message.context_id or derived_id("ctx", agent.name, caller, message.message_id)
        stamp = self.clock.now().isoformat()
        row = TaskRow(
            task, agent.name, "task", context, message.message_id, caller, "submitted",
            {"type": task_type}, None, None, stamp, stamp,
        )  # fmt: skip
        # The row first (its context), then the task: a restart between the two finds the row
        # and makes the task on the message's next delivery.
        row = (await self.index.claim(row, stale_before=float("inf"), now=0.0))[0] or row
        record = await self.port.put_task(agent.name, task, task_type, text, caller=caller)
        return task_view(TaskEnd(record), row)

    async def view(self, task: str) -> TaskView:
        return task_view(await self.port.task(task), await self.index.get(task))

    async def settled(self, task: str, seconds: float) -> TaskView:
        """The task once it is final or waits for a decision, or as it is after ``seconds``."""
        deadline = self.clock.monotonic() + seconds
        with self.port.follow(task) as subscription:
            while True:
                view = await self.view(task)
                left = deadline - self.clock.monotonic()
                if view.final or view.state in INTERRUPTED or left <= 0:
                    return view
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(left, POLL)):
                        await subscription.next()

    async def events(
        self, task: str, *, first: TaskView | None = None, until_interrupted: bool = True
    ) -> AsyncIterator[Event]:
        """The task now, then an event per change of its state or status, until it ends (or,
        ``until_interrupted``, comes to wait for a decision)."""
        with self.port.follow(task) as subscription:
            view = first or await self.view(task)
            yield to_task(view)
            signature = view.signature()
            while not view.final:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(POLL):
                        await subscription.next()
                view = await self.view(task)
                if view.signature() == signature:
                    continue
                signature = view.signature()
                if view.result is not None:
                    yield artifact_event(view)
                yield status_event(view)
                if until_interrupted and view.state in INTERRUPTED:
                    return

    async def subscribe(self, task: str) -> AsyncIterator[Event]:
        view = await self.view(task)
        if view.final:
            raise UnsupportedOperationError(
                message=f"task {task} is {view.state}: a finished task has no more events"
            )
        async for event in self.events(task, first=view, until_interrupted=False):
            yield event

    async def answer(self, task: str, message: pb.Message, caller: str) -> TaskView:
        end = await self.port.task(task)
        view = task_view(end, await self.index.get(task))
        if view.state != "input-required":
            raise UnsupportedOperationError(
                message=f"task {task} is {view.state}: it takes no further messages (a new "
                "message makes a new task)"
            )
        for decision in decisions_of(message, end.approvals):
            await self.port.decide(
                decision.approval,
                decision.decision,
                decision.digest,
                reason=decision.reason,
                caller=caller,
            )
        return await self.view(task)

    async def cancel(self, task: str) -> TaskView:
        view = await self.view(task)
        if view.final:
            raise TaskNotCancelableError(message=f"task {task} is {view.state} already")
        await self.port.cancel_task(task)
        # A task in an iteration stops at its end: give it a moment to say so.
        return await self.settled(task, 5.0)

    @staticmethod
    def metadata_of(view: TaskView) -> dict[str, Any]:
        return dict(view.metadata)
