"""The A2A request handler: the SDK's bindings (JSON-RPC, HTTP+JSON) call it, it answers from
ankka's turns and tasks (:mod:`.turns`, :mod:`.tasks`) and push configs (:mod:`.push`).

One handler serves every agent; the route names the agent (``/a2a/{agent}``) and the identity
layer in front names the caller (``ServerCallContext.state``). Who may see a task is the
session policy's (docs/security.md): a task is its creator's, the platform's and whoever its
agent's access names; anyone else is told it does not exist (A2A asks that a task one may not
see is not revealed). ankka's own errors become A2A's here, in one place.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    A2AError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from ankka._kernel.errors import AnkkaError, NotFound
from ankka.runtime.serve.a2a.index import A2AIndex, TaskRow
from ankka.runtime.serve.a2a.port import AgentInfo, RuntimePort
from ankka.runtime.serve.a2a.push import PushDesk
from ankka.runtime.serve.a2a.tasks import Tasks
from ankka.runtime.serve.a2a.turns import Turns
from ankka.runtime.serve.a2a.wire import TaskView, state_name, to_task

__all__ = ["AnkkaRequestHandler"]

DEFAULT_PAGE = 50
MAX_PAGE = 100
WAIT_SECONDS = 300.0  # SendMessage without returnImmediately waits at most this long


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """ankka's errors as A2A's: a missing task is TaskNotFound, a refusal says why."""
    try:
        yield
    except A2AError:
        raise
    except NotFound as exc:
        raise TaskNotFoundError(message=str(exc)) from exc
    except AnkkaError as exc:
        if exc.status == 409 and exc.kind == "conflict":
            raise InvalidParamsError(
                message=f"this messageId was sent before with another message: {exc}"
            ) from exc
        if exc.status in (400, 422):
            raise InvalidParamsError(message=str(exc)) from exc
        raise InvalidRequestError(message=f"{exc.kind}: {exc}") from exc


def _page_token(token: str) -> tuple[str, str] | None:
    if not token:
        return None
    try:
        updated, task = json.loads(base64.urlsafe_b64decode(token.encode()))
        return str(updated), str(task)
    except (ValueError, TypeError, binascii.Error):
        raise InvalidParamsError(message="pageToken is not one this server gave") from None


def _next_token(updated: str, task: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([updated, task]).encode()).decode()


class AnkkaRequestHandler(RequestHandler):
    def __init__(
        self, port: RuntimePort, index: A2AIndex, turns: Turns, tasks: Tasks, push: PushDesk
    ) -> None:
        self.port = port
        self.index = index
        self.turns = turns
        self.tasks = tasks
        self.push = push
        self.agents = port.agents()

    # -- who and where ------------------------------------------------------------------------

    def _agent(self, context: ServerCallContext) -> AgentInfo:
        name = str(context.state.get("agent", ""))
        agent = self.agents.get(name)
        if agent is None:
            raise InvalidRequestError(message=f"there is no agent {name!r} here")
        return agent

    @staticmethod
    def _caller(context: ServerCallContext) -> str:
        return str(context.state["caller"])

    async def _row(self, agent: AgentInfo, task: str, caller: str, right: str) -> TaskRow | None:
        """The task's A2A row (None: an autonomous task made through ankka's own API), when
        it is this agent's and the caller may act on it; else it is not found."""
        row = await self.index.get(task)
        if row is not None:
            if row.agent != agent.name or not self.port.allows(
                caller,
                right,  # type: ignore[arg-type]
                creator=row.created_by,
                agent=agent.name,
            ):
                raise TaskNotFoundError(message=f"there is no task {task!r}")
            return row
        if agent.kind == "autonomous":
            with _translated():
                end = await self.port.task(task)
            record = end.record
            if record.spec.agent == agent.name and self.port.allows(
                caller,
                right,  # type: ignore[arg-type]
                creator=record.created_by,
                agent=agent.name,
            ):
                return None
        raise TaskNotFoundError(message=f"there is no task {task!r}")

    async def _view(self, agent: AgentInfo, task: str, caller: str) -> TaskView:
        row = await self._row(agent, task, caller, "read")
        with _translated():
            if agent.kind == "request":
                assert row is not None
                return await self.turns.view(row)
            return await self.tasks.view(task)

    # -- messages -----------------------------------------------------------------------------

    async def on_message_send(
        self, params: pb.SendMessageRequest, context: ServerCallContext
    ) -> pb.Task | pb.Message:
        agent, caller = self._agent(context), self._caller(context)
        message = params.message
        self._check_message(message)
        config = params.configuration
        history = config.history_length if config.HasField("history_length") else None
        with _translated():
            if message.task_id:
                view = await self._continue(agent, message, caller)
            elif agent.kind == "request":
                live, view = await self.turns.start(agent.name, message, caller, streaming=False)
                await self._push_from(config, view.id, caller)
                if live is not None and not config.return_immediately:
                    async for _ in live.follow():
                        pass
                    view = live.view
            else:
                view = await self.tasks.start(agent, params, caller)
                await self._push_from(config, view.id, caller)
                if not config.return_immediately:
                    view = await self.tasks.settled(view.id, WAIT_SECONDS)
        return to_task(view, history_length=history)

    @staticmethod
    def _check_message(message: pb.Message) -> None:
        if not message.message_id:
            raise InvalidParamsError(message="message.messageId is required")
        if message.role != pb.ROLE_USER:
            raise InvalidParamsError(message="a message to an agent has role ROLE_USER")
        if not message.parts:
            raise InvalidParamsError(message="message.parts is empty: send a text part")

    async def _continue(self, agent: AgentInfo, message: pb.Message, caller: str) -> TaskView:
        row = await self._row(agent, message.task_id, caller, "decide")
        if row is not None and message.context_id and message.context_id != row.context_id:
            raise InvalidParamsError(
                message=f"task {row.id} is in context {row.context_id}, not {message.context_id}"
            )
        if agent.kind == "request":
            assert row is not None
            return await self.turns.answer(row, message, caller)
        return await self.tasks.answer(message.task_id, message, caller)

    async def on_message_send_stream(
        self, params: pb.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        agent, caller = self._agent(context), self._caller(context)
        message = params.message
        self._check_message(message)
        with _translated():
            if message.task_id:
                view = await self._continue(agent, message, caller)
                events: AsyncIterator[Any] = (
                    self.tasks.events(view.id, first=view)
                    if agent.kind == "autonomous"
                    else self._once(view)
                )
            elif agent.kind == "request":
                live, view = await self.turns.start(agent.name, message, caller, streaming=True)
                await self._push_from(params.configuration, view.id, caller)
                events = self._from_live(view, live)
            else:
                view = await self.tasks.start(agent, params, caller)
                await self._push_from(params.configuration, view.id, caller)
                events = self.tasks.events(view.id, first=view)
        async for event in events:
            yield event

    @staticmethod
    async def _once(view: TaskView) -> AsyncIterator[Any]:
        yield to_task(view)

    @staticmethod
    async def _from_live(view: TaskView, live: Any) -> AsyncIterator[Any]:
        yield to_task(view)
        if live is not None:
            async for event in live.follow():
                yield event

    # -- tasks --------------------------------------------------------------------------------

    async def on_get_task(self, params: pb.GetTaskRequest, context: ServerCallContext) -> pb.Task:
        agent, caller = self._agent(context), self._caller(context)
        if params.HasField("history_length") and params.history_length < 0:
            raise InvalidParamsError(message="historyLength is 0 or more")
        view = await self._view(agent, params.id, caller)
        length = params.history_length if params.HasField("history_length") else None
        return to_task(view, history_length=length)

    async def on_cancel_task(
        self, params: pb.CancelTaskRequest, context: ServerCallContext
    ) -> pb.Task:
        agent, caller = self._agent(context), self._caller(context)
        row = await self._row(agent, params.id, caller, "write")
        with _translated():
            if agent.kind == "request":
                assert row is not None
                view = await self.turns.cancel(row)
            else:
                view = await self.tasks.cancel(params.id)
        return to_task(view)

    async def on_subscribe_to_task(
        self, params: pb.SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        agent, caller = self._agent(context), self._caller(context)
        row = await self._row(agent, params.id, caller, "read")
        with _translated():
            if agent.kind == "request":
                assert row is not None
                events = self.turns.events(row)
            else:
                events = self.tasks.subscribe(params.id)
            async for event in events:
                yield event

    async def on_list_tasks(
        self, params: pb.ListTasksRequest, context: ServerCallContext
    ) -> pb.ListTasksResponse:
        agent, caller = self._agent(context), self._caller(context)
        size = params.page_size if params.HasField("page_size") else DEFAULT_PAGE
        if not 1 <= size <= MAX_PAGE:
            raise InvalidParamsError(message=f"pageSize is 1 to {MAX_PAGE}, not {size}")
        if params.HasField("history_length") and params.history_length < 0:
            raise InvalidParamsError(message="historyLength is 0 or more")
        length = params.history_length if params.HasField("history_length") else None
        wanted = state_name(params.status) if params.status else None
        after = (
            params.status_timestamp_after.ToDatetime().isoformat()
            if params.HasField("status_timestamp_after")
            else None
        )
        cursor = _page_token(params.page_token)
        visible = [
            item
            async for item in self._visible(agent, caller, params.context_id or None)
            if (wanted is None or item[0].state == wanted) and (after is None or item[1] > after)
        ]
        start = 0
        if cursor is not None:
            start = next(
                (i + 1 for i, (v, stamp) in enumerate(visible) if (stamp, v.id) == cursor),
                len(visible),
            )
        page = visible[start : start + size]
        token = ""
        if start + size < len(visible) and page:
            token = _next_token(page[-1][1], page[-1][0].id)
        artifacts = params.include_artifacts if params.HasField("include_artifacts") else False
        return pb.ListTasksResponse(
            tasks=[to_task(v, history_length=length, artifacts=artifacts) for v, _ in page],
            next_page_token=token,
            page_size=size,
            total_size=len(visible),
        )

    async def _visible(
        self, agent: AgentInfo, caller: str, context: str | None
    ) -> AsyncIterator[tuple[TaskView, str]]:
        """Every task of ``agent`` the caller may read, most recently updated first, with the
        time it was updated (the cursor's key)."""
        before: tuple[str, str] | None = None
        who = self.port.readers(caller)  # the store's query holds only what the caller may read
        while True:
            if agent.kind == "request":
                rows = await self.index.page(
                    agent.name, before=before, limit=500, context=context, who=who
                )
                for row in rows:
                    if self.port.allows(caller, "read", creator=row.created_by, agent=agent.name):
                        yield await self.turns.view(row), row.updated_at
                if len(rows) < 500:
                    return
                before = (rows[-1].updated_at, rows[-1].id)
                continue
            records = await self.port.task_page(agent.name, before=before, limit=500, caller=caller)
            for record in records:
                if not self.port.allows(
                    caller, "read", creator=record.created_by, agent=agent.name
                ):
                    continue
                found = await self.index.get(record.id)
                if context is not None and (found is None or found.context_id != context):
                    continue
                view = await self.tasks.view(record.id)
                yield view, record.updated_at.isoformat() if record.updated_at else ""
            if len(records) < 500:
                return
            last = records[-1]
            before = (last.updated_at.isoformat() if last.updated_at else "", last.id)

    # -- push notification configs ---------------------------------------------------------

    async def _push_from(self, config: pb.SendMessageConfiguration, task: str, caller: str) -> None:
        if config.HasField("task_push_notification_config"):
            given = pb.TaskPushNotificationConfig()
            given.CopyFrom(config.task_push_notification_config)
            given.task_id = task
            await self.push.create(given, caller)

    async def on_create_task_push_notification_config(
        self, params: pb.TaskPushNotificationConfig, context: ServerCallContext
    ) -> pb.TaskPushNotificationConfig:
        agent, caller = self._agent(context), self._caller(context)
        self._push_enabled()
        await self._row(agent, params.task_id, caller, "write")
        return await self.push.create(params, caller)

    async def on_get_task_push_notification_config(
        self, params: pb.GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> pb.TaskPushNotificationConfig:
        agent, caller = self._agent(context), self._caller(context)
        self._push_enabled()
        await self._row(agent, params.task_id, caller, "read")
        found = await self.push.get(params.task_id, params.id)
        if found is None:
            raise TaskNotFoundError(
                message=f"task {params.task_id!r} has no push notification config {params.id!r}"
            )
        return found

    async def on_list_task_push_notification_configs(
        self, params: pb.ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> pb.ListTaskPushNotificationConfigsResponse:
        agent, caller = self._agent(context), self._caller(context)
        self._push_enabled()
        await self._row(agent, params.task_id, caller, "read")
        configs = await self.push.list(params.task_id)
        return pb.ListTaskPushNotificationConfigsResponse(configs=configs, next_page_token="")

    async def on_delete_task_push_notification_config(
        self, params: pb.DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        agent, caller = self._agent(context), self._caller(context)
        self._push_enabled()
        await self._row(agent, params.task_id, caller, "write")
        await self.push.delete(params.task_id, params.id)

    def _push_enabled(self) -> None:
        if not self.push.enabled:
            raise PushNotificationNotSupportedError(
                message="push notifications are off on this runtime (ankka serve --a2a-push on)"
            )

    async def on_get_extended_agent_card(
        self, params: pb.GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> pb.AgentCard:
        raise UnsupportedOperationError(
            message="this agent has no extended card: its public card says everything"
        )
