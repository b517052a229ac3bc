"""A request agent over A2A: a message is a turn in the session its ``contextId`` names.

The A2A task's id is derived from the agent, the caller and the message's ``messageId``, and
it is the turn's id in the journal. So a message sent again answers what it answered before,
exactly: the task's row (claimed before the turn runs, so two deliveries never both run it)
says how it ended, and if the process died after the turn was committed and before the row
was settled, the journal still holds the turn under that id and is read instead; if it died
before, nothing was committed and the turn runs again. A turn that waits for approval is
``INPUT_REQUIRED``; the decision arrives as the next message to the task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from typing import Any

from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from ankka._kernel.clock import Clock
from ankka._kernel.errors import AnkkaError
from ankka.runtime.serve.a2a.decisions import decisions_of
from ankka.runtime.serve.a2a.index import A2AIndex, TaskRow
from ankka.runtime.serve.a2a.live import Event, Live
from ankka.runtime.serve.a2a.port import RuntimePort, TurnEnd
from ankka.runtime.serve.a2a.wire import (
    FINAL,
    Said,
    TaskView,
    artifact_event,
    derived_id,
    message_text,
    status_event,
    to_task,
)

__all__ = ["Turns", "status_content"]

log = logging.getLogger("ankka.a2a")

HOW_TO_DECIDE = (
    'Send the task a message with a data part {"decision": "approve"|"refuse", '
    '"approval": ID, "digest": DIGEST, "reason"?: TEXT} (approval and digest may be left '
    "out while one request waits), or the text approve or refuse."
)


def status_content(state: str, reason: str, approvals: tuple[dict[str, Any], ...]) -> object:
    """A status message: the approvals a task waits for, or why it ended."""
    if state == "input-required":
        return {"awaitingApproval": list(approvals), "howToDecide": HOW_TO_DECIDE}
    return reason or None


def turn_view(row: TaskRow, *, at: datetime | None = None) -> TaskView:
    body = row.body
    reply = body.get("reply")
    history = [Said("user", body.get("text", ""), row.message_id)]
    if row.state == "completed" and reply is not None:
        history.append(Said("agent", reply, f"{row.id}:reply"))
    approvals = tuple(body.get("approvals") or ())
    return TaskView(
        row.id,
        row.context_id,
        row.state,
        at or datetime.fromisoformat(row.updated_at),
        status=status_content(row.state, str(body.get("reason") or ""), approvals),
        result=reply if row.state == "completed" else None,
        history=history,
        metadata={"ankka": {"agent": row.agent, "session": row.context_id}},
    )


def _body(text: str, end: TurnEnd) -> dict[str, Any]:
    return {"text": text, "reply": end.reply, "reason": end.reason, "approvals": end.approvals}


def _ended(row: TaskRow, end: TurnEnd, at: datetime) -> TaskRow:
    """``row`` as ``end`` leaves it (nothing written)."""
    body = _body(str(row.body.get("text", "")), end)
    return TaskRow(
        row.id, row.agent, row.kind, row.context_id, row.message_id, row.created_by,
        end.state, body, row.owner, row.claimed_at, row.created_at, at.isoformat(),
    )  # fmt: skip


class Turns:
    """The request agents' side of the handler."""

    def __init__(
        self, port: RuntimePort, index: A2AIndex, clock: Clock, *, owner: str, stale: float
    ) -> None:
        self.port = port
        self.index = index
        self.clock = clock
        self.owner = owner
        self.stale = stale  # a claim older than this (seconds) was its process's last act
        self.live: dict[str, Live] = {}
        self._runs: dict[str, asyncio.Task[None]] = {}
        self.on_change: list[Any] = []  # callbacks (task id) -> None, told of every new state

    async def aclose(self) -> None:
        for run in list(self._runs.values()):
            run.cancel()
        if self._runs:
            await asyncio.wait(set(self._runs.values()))

    def _changed(self, task: str) -> None:
        for callback in self.on_change:
            callback(task)

    # -- starting ----------------------------------------------------------------------------

    async def start(
        self, agent: str, message: pb.Message, caller: str, *, streaming: bool
    ) -> tuple[Live | None, TaskView]:
        """Claim the message's task and start its turn (``Live`` to follow it), or, when it
        was sent before, what it answered (``Live`` of the run still going, if any)."""
        text = message_text(message)
        task = derived_id("a2a", agent, caller, message.message_id)
        context = message.context_id or derived_id("ctx", agent, caller, message.message_id)
        now = self.clock.now()
        stamp = now.isoformat()
        row = TaskRow(
            task, agent, "turn", context, message.message_id, caller, "submitted",
            {"text": text}, self.owner, None, stamp, stamp,
        )  # fmt: skip
        wall = now.timestamp()
        there, taken = await self.index.claim(row, stale_before=wall - self.stale, now=wall)
        if there is not None and there.agent != agent:
            raise InvalidParamsError(message=f"message {message.message_id!r} went elsewhere")
        if taken and there is not None:
            # Its process died: if it committed the turn, the journal says so; else run it.
            recorded = await self.port.recorded_turn(there.context_id, task)
            if recorded is not None:
                return None, turn_view(await self._settle(there, recorded))
        elif there is not None:
            return self.live.get(task), await self._replayed(there)
        view = TaskView(task, context, "working", now, history=[Said("user", text, row.message_id)])
        live = Live(view)
        self.live[task] = live
        run = asyncio.create_task(self._run(row, live, streaming=streaming))
        self._runs[task] = run
        run.add_done_callback(lambda _: self._runs.pop(task, None))
        return live, view

    async def _replayed(self, row: TaskRow) -> TaskView:
        """A task sent before: its row, brought up to date from the journal when the row does
        not say how it ended (the process died after the turn was committed) or when it waited
        for a decision (which may have been taken through the runtime's own API)."""
        if row.state in FINAL:
            return turn_view(row)
        if row.id in self.live:
            return self.live[row.id].view
        recorded = await self.port.recorded_turn(row.context_id, row.id)
        if recorded is None:
            return turn_view(row)  # being run by another process: it is working
        settled = await self._settle(row, recorded)
        return turn_view(settled)

    async def _settle(self, row: TaskRow, end: TurnEnd) -> TaskRow:
        settled = _ended(row, end, self.clock.now())
        await self.index.settle(row.id, end.state, settled.body, self.clock.now())
        self._changed(row.id)
        return settled

    async def _run(self, row: TaskRow, live: Live, *, streaming: bool) -> None:
        pieces = 0

        async def on_text(text: str) -> None:
            nonlocal pieces
            await live.add(artifact_event(live.view, text, append=pieces > 0, last=False))
            pieces += 1

        try:
            try:
                end = await self.port.run_turn(
                    row.agent,
                    row.context_id,
                    str(row.body["text"]),
                    caller=row.created_by,
                    turn_id=row.id,
                    on_text=on_text if streaming else None,
                )
            except AnkkaError as exc:
                end = TurnEnd("rejected", reason=f"{exc.kind}: {exc}")
            # The answer goes out first, the row after it: the turn is in the journal already,
            # and a row still "submitted" (a restart in between) is settled from the journal.
            # Until the row is written this Live answers for the task (it stays in self.live).
            view = turn_view(_ended(row, end, self.clock.now()))
            if view.result is not None:
                await live.add(artifact_event(view, append=False, last=True))
            await live.add(status_event(view), view=view, end=True)
            await self._settle(row, end)
        except asyncio.CancelledError:
            view = turn_view(row)
            await live.finish(view)
            raise
        except Exception:
            log.exception("A2A task %s: the turn failed unexpectedly", row.id)
            end = TurnEnd("failed", reason="internal_error: see the runtime's log")
            view = turn_view(await self._settle(row, end))
            await live.add(status_event(view), view=view, end=True)
        finally:
            self.live.pop(row.id, None)

    # -- reading -----------------------------------------------------------------------------

    async def view(self, row: TaskRow) -> TaskView:
        live = self.live.get(row.id)
        if live is not None:
            return live.view
        if row.state == "input-required" or row.state == "submitted":
            return await self._replayed(row)
        return turn_view(row)

    async def events(self, row: TaskRow) -> AsyncIterator[Event]:
        """SubscribeToTask: the task now, then its events until it ends."""
        view = await self.view(row)
        if view.final:
            raise UnsupportedOperationError(
                message=f"task {row.id} is {view.state}: a finished task has no more events"
            )
        yield to_task(view)
        live = self.live.get(row.id)
        if live is not None:
            async for event in live.follow(len(live.events)):
                yield event
            return
        # Waiting for a decision (or run by another process): follow its row.
        signature = view.signature()
        while True:
            await asyncio.sleep(0.25)
            fresh = await self.index.get(row.id)
            if fresh is None:
                return
            now = await self.view(fresh)
            if now.signature() != signature:
                if now.result is not None:
                    yield artifact_event(now)
                yield status_event(now)
                signature = now.signature()
            if now.final:
                return

    # -- continuing: a decision, a cancel ----------------------------------------------------

    async def answer(self, row: TaskRow, message: pb.Message, caller: str) -> TaskView:
        """A message to a task that waits for approval: the decisions it carries."""
        view = await self.view(row)
        if view.state != "input-required":
            raise UnsupportedOperationError(
                message=f"task {row.id} is {view.state}: it takes no further messages; send a "
                f"new message in context {row.context_id} for another turn"
            )
        status = view.status if isinstance(view.status, dict) else {}
        pending = tuple(status.get("awaitingApproval") or ())
        end: TurnEnd | None = None
        for decision in decisions_of(message, pending):
            end = await self.port.decide(
                decision.approval,
                decision.decision,
                decision.digest,
                reason=decision.reason,
                caller=caller,
            )
        if end is None:
            return view
        decided = turn_view(await self._settle(row, end))
        live = self.live.get(row.id)
        if live is not None:  # its row is still being written: it answers with this now
            live.view = decided
        return decided

    async def cancel(self, row: TaskRow) -> TaskView:
        run = self._runs.get(row.id)
        if run is None:
            view = await self.view(row)
            raise TaskNotCancelableError(
                message=f"task {row.id} is {view.state}: a turn that has ended, or waits for a "
                "decision (refuse it instead), cannot be cancelled"
            )
        run.cancel()
        await asyncio.wait({run})
        end = TurnEnd("canceled", reason="cancelled by the caller")
        return turn_view(await self._settle(row, end))

    @staticmethod
    def history_of(view: TaskView, config: Mapping[str, Any]) -> pb.Task:
        length = config.get("history_length")
        return to_task(view, history_length=length if isinstance(length, int) else None)

    def found(self, task: str) -> None:
        raise TaskNotFoundError(message=f"there is no task {task!r}")
