"""The task routes of the runtime's HTTP API. Thin: parse, ask the :class:`TaskHost`, render.

- ``PUT /v1/agents/{agent}/tasks/{task}`` ``{"type", "instructions", "attachments"?,
  "depends_on"?, "instance"?, "parent"?, "lineage"?}`` → 201 with the record (200 when the
  same body was sent before); a ``parent`` (another runtime's delegation) only from the
  runtime's delegators;
- ``GET /v1/tasks/{task}`` (``?wait=S`` holds up to S seconds until the task is final);
- ``POST /v1/tasks/{task}/cancel``;
- ``POST /v1/agents/{agent}/instances/{instance}/{suspend|resume|terminate}``,
  ``GET /v1/agents/{agent}/instances/{instance}``;
- ``GET /v1/agents/{agent}/instances/{instance}/notifications`` and
  ``GET /v1/tasks/{task}/notifications``: server-sent events, a ``snapshot`` first; a task's
  stream ends with the task, an instance's never by itself; ``?wait=S`` ends either after S
  seconds (0 to 300).

The app's bounds (:mod:`ankka.runtime.serve.bounds`) stand in front: the body's size and who the
caller is. A task is its creator's, the platform's and whoever its agent's access names
(read: its record and notifications; write: create it again, cancel it), like a session
(:mod:`ankka.runtime.declare.policy`); an instance is its creator's (whoever's first assignment
created it) and the platform's. An instance from a store older than that record is the
platform's and that of whoever created a task it holds now.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Path, Query
from pydantic import BeforeValidator, Field
from starlette.requests import Request
from starlette.responses import Response

from ankka._kernel.errors import NotFound, RequestError
from ankka._kernel.identity import is_platform
from ankka.runtime.declare.policy import NotPermitted, Right, SessionPolicy
from ankka.runtime.drivers.tasks.host import InstanceView, TaskHost
from ankka.runtime.drivers.tasks.notify import (
    EVENTS,
    Dropped,
    Notice,
    Notifier,
    Resynced,
    Subscription,
)
from ankka.runtime.records.delegation import TreeView
from ankka.runtime.records.tasks import (
    MAX_ID,
    Attachment,
    InstanceState,
    TaskBudget,
    TaskRecord,
    TaskSpec,
    check_id,
    check_instance_name,
)
from ankka.runtime.serve.api import EventStream, errors, events
from ankka.runtime.serve.identity import caller_of
from ankka.runtime.serve.wire import Instance, Task, TaskBody

__all__ = [
    "TASK_AGENT_PATHS",
    "Wait",
    "add_task_routes",
    "event_stream",
    "follow",
    "instance_json",
    "sse",
    "stream_answers",
    "task_json",
]

MAX_WAIT = 300.0
KEEP_ALIVE = 15.0
COST_UNKNOWN = "unknown"
_FINAL_EVENTS = {"task_completed", "task_failed", "task_cancelled"}
_OPERATIONS = {
    "suspend": InstanceState.SUSPENDED,
    "resume": InstanceState.ACTIVE,
    "terminate": InstanceState.TERMINATED,
}


TASK_PATH = "/v1/agents/{agent}/tasks/{task}"
INSTANCE_PATH = "/v1/agents/{agent}/instances/{instance}"
TASK_AGENT_PATHS = (
    TASK_PATH,
    INSTANCE_PATH,
    f"{INSTANCE_PATH}/notifications",
    f"{INSTANCE_PATH}/{{operation}}",
)
_IDS = f"1 to {MAX_ID} letters, digits, '_', '.', ':' or '-', starting with a letter or digit"
Worker = Annotated[str, Path(description="an autonomous agent this service declares")]
TaskId = Annotated[str, Path(description=_IDS, min_length=1, max_length=MAX_ID)]
InstanceId = Annotated[str, Path(description=_IDS, min_length=1, max_length=MAX_ID)]
Operation = Literal["suspend", "resume", "terminate"]


def _seconds(value: object) -> object:
    if value is None or isinstance(value, int | float):
        return value
    try:
        seconds = float(str(value))
    except ValueError:
        raise ValueError(f"{str(value)[:40]!r} is not a number of seconds") from None
    if not 0 <= seconds <= MAX_WAIT:
        raise ValueError(f"must be 0 to {MAX_WAIT:g} seconds, not {str(value)[:40]}")
    return seconds


Wait = Annotated[
    Annotated[float, Field(ge=0, le=MAX_WAIT)] | None,
    BeforeValidator(_seconds),
    Query(description=f"hold (or stream) up to this many seconds, 0 to {MAX_WAIT:g}"),
]
# What every task route can answer besides its own: the caller unidentified (401) or not
# permitted (403), the id or a query value refused (422), a body too large (413), the store
# or the token review out (503).
_ANY = (401, 403, 413, 422, 503)


# What a task's or an instance's stream sends (docs/http-api.md, Notifications).
TASK_EVENTS = ("snapshot", *EVENTS, "dropped")


def stream_answers(what: str, names: tuple[str, ...]) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a notification stream's route."""
    return {200: events(f"server-sent events: a snapshot, then {what}", *names), **errors(*_ANY)}


def _spec(agent: str, body: TaskBody) -> TaskSpec:
    attachments: list[Attachment] = []
    for index, item in enumerate(body.attachments, 1):
        if isinstance(item, str):
            attachments.append(Attachment(f"attachment-{index}", text=item))
            continue
        if (item.text is None) == (item.ref is None):
            raise RequestError(
                f"attachment {index} needs exactly one of 'text' (inline) or 'ref' (a reference "
                "a tool can fetch)"
            )
        attachments.append(Attachment(item.name or f"attachment-{index}", item.text, item.ref))
    budget = body.budget
    return TaskSpec(
        agent,
        body.type,
        body.instructions,
        tuple(attachments),
        tuple(body.depends_on),
        TaskBudget(budget.iterations, budget.tokens) if budget is not None else None,
        parent=body.parent,
        lineage=tuple(body.lineage),
        name=body.name,
    )


def _delegated(request: Request, body: TaskBody, agent: str, delegators: frozenset[str]) -> None:
    """A body naming a parent is another runtime's delegation: only a caller the runtime's
    delegators name (``ANKKA_DELEGATORS``) may send one, with the chain above it, which must
    not hold the agent already (a cycle)."""
    if body.parent is None:
        if body.lineage:
            raise RequestError("'lineage' comes with 'parent' (a delegated child's chain)")
        return
    caller = caller_of(request.scope)
    if caller not in delegators:
        raise NotPermitted(
            f"caller {caller!r} may not create a task as another runtime's child: it is not "
            "among this runtime's delegators (ANKKA_DELEGATORS)"
        )
    if not body.lineage:
        raise RequestError("a task with a 'parent' needs its 'lineage' (the agents above it)")
    if agent in body.lineage:
        chain = " → ".join((*body.lineage, agent))
        raise RequestError(f"delegating to {agent!r} would make a cycle: {chain}")


def task_json(record: TaskRecord) -> dict[str, Any]:
    tree = record.tree or TreeView(
        parent=record.spec.parent, tree_usage=record.usage, tree_iterations=record.iterations_used
    )
    return {
        "id": record.id,
        "name": record.spec.name,
        "agent": record.spec.agent,
        "type": record.spec.type,
        "state": record.state.value,
        "end": tree.end if record.final else None,
        "instance": record.instance,
        "iterations": {"used": record.iterations_used, "budget": record.budget},
        "tree_iterations": tree.tree_iterations,
        "tokens": _tokens(tree),
        "usage": record.usage.as_dict(),
        "tree_usage": tree.tree_usage.as_dict(),
        "parent": tree.parent,
        "children": list(tree.children),
        "handoffs": list(tree.handoffs),
        "cost": COST_UNKNOWN,
        "result": record.result,
        "reason": record.reason,
        "depends_on": list(record.spec.depends_on),
        "attachments": [a.as_dict() for a in record.spec.attachments],
        "cancel_requested": record.cancel_requested,
        "version": record.version,
        "created_by": record.created_by,
        "created_at": record.created_at.isoformat() if record.created_at else None,
        "updated_at": record.updated_at.isoformat() if record.updated_at else None,
    }


def _tokens(tree: TreeView) -> dict[str, int] | None:
    """A task's token budget and what is claimed of it (its tree's spend and its working
    children's grants), when it has one."""
    if tree.token_budget is None:
        return None
    return {"budget": tree.token_budget, "claimed": tree.tokens_claimed}


def instance_json(view: InstanceView) -> dict[str, Any]:
    return {
        "agent": view.record.agent,
        "id": view.record.id,
        "state": view.record.state.value,
        "created_by": view.record.created_by,
        "current": view.current,
        "queue": [{"task": t.id, "state": t.state.value} for t in view.queue],
    }


_TASK_VERBS: dict[Right, str] = {"read": "read", "write": "create or cancel", "decide": "decide"}


def _permitted(
    request: Request, record: TaskRecord, policy: SessionPolicy, right: Right
) -> TaskRecord:
    """``record``, when the caller holds ``right`` over it (:mod:`ankka.runtime.declare.policy`)."""
    caller = caller_of(request.scope)
    if not policy.allows(caller, right, creator=record.created_by, agent=record.spec.agent):
        raise NotPermitted(
            f"caller {caller!r} may not {_TASK_VERBS[right]} task {record.id!r}: it is its "
            "creator's, the platform's, and of whoever its agent's access names"
        )
    return record


def _instance_permitted(request: Request, view: InstanceView) -> InstanceView:
    """``view``, when the caller may see and act on the instance: its creator or the platform
    (an instance from an older store, with no creator: whoever created a task it holds now,
    and anyone while it holds none)."""
    caller = caller_of(request.scope)
    creator = view.record.created_by
    if is_platform(caller) or caller == creator:
        return view
    creators = {t.created_by for t in view.queue}
    if creator is None and (not creators or caller in creators):
        return view
    raise NotPermitted(
        f"caller {caller!r} may not use instance {view.record.id!r} of agent "
        f"{view.record.agent!r}: an instance is its creator's and the platform's"
    )


def sse(event: str, data: object, number: int | None = None) -> bytes:
    head = f"id: {number}\n" if number is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


# How often a task's stream, hearing nothing, reads the task's record: its end is told even
# when the notification of it was lost on the way from another process (the relay is live,
# not durable).
RECHECK = 5.0

Ended = Callable[[], Awaitable[Notice | None]]
Snapshot = Callable[[], Awaitable[bytes]]


async def event_stream(
    subscription: Subscription,
    snapshot: bytes,
    *,
    seconds: float | None,
    ended: Ended | None = None,
    keep: Callable[[Notice], Awaitable[bool]] | None = None,
    recheck: float = RECHECK,
    task: str | None = None,
    again: Snapshot | None = None,
) -> AsyncIterator[bytes]:
    """The stream: ``snapshot``, then the events (those ``keep`` keeps); for ``seconds``
    when given. ``ended``: a task's stream, which ends after the final event of ``task``
    (not a descendant's, whose events it carries too), or, heard of no other way, the end
    its record shows. Once other processes' events may have been missed (the relay's
    break), the stream reads again: a task's ends with the end its record shows, if it has
    ended; otherwise ``again`` is sent (the snapshot as it is now)."""
    yield snapshot
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds if seconds is not None else None
    quiet_since = loop.time()
    while True:
        left = until - loop.time() if until is not None else KEEP_ALIVE
        if left <= 0:
            return
        wait = min(KEEP_ALIVE, left, recheck if ended is not None else KEEP_ALIVE)
        try:
            async with asyncio.timeout(wait):
                item = await subscription.next()
        except TimeoutError:
            final = await ended() if ended is not None else None
            if final is not None:
                yield sse(final.event, final.as_dict(), final.number)
                return
            if loop.time() - quiet_since >= KEEP_ALIVE and (until is None or loop.time() < until):
                yield b": keep-alive\n\n"
                quiet_since = loop.time()
            continue
        quiet_since = loop.time()
        if isinstance(item, Dropped):
            yield sse("dropped", {"count": item.count})
            continue
        if isinstance(item, Resynced):
            final = await ended() if ended is not None else None
            if final is not None:
                yield sse(final.event, final.as_dict(), final.number)
                return
            if again is not None:
                yield await again()
            continue
        if keep is not None and not await keep(item):
            continue
        yield sse(item.event, item.as_dict(), item.number)
        if ended is not None and item.event in _FINAL_EVENTS and task in (None, item.task):
            return


async def _once(chunk: bytes) -> AsyncIterator[bytes]:
    yield chunk


def follow(
    notifier: Notifier,
    key: tuple[str, ...],
    subscription: Subscription,
    events: AsyncIterator[bytes],
) -> EventStream:
    """``events`` as the stream's answer; ``subscription`` removed however the stream ends."""

    async def body() -> AsyncIterator[bytes]:
        try:
            async for chunk in events:
                yield chunk
        finally:
            notifier.remove(key, subscription)

    return EventStream(body(), headers={"cache-control": "no-cache"})


def add_task_routes(app: FastAPI, host: TaskHost, policy: SessionPolicy | None = None) -> None:
    """The routes, on ``app``; their errors are answered by the app's handlers. ``policy``: who
    may act on a task besides its creator and the platform (default: nobody)."""
    policy = policy or SessionPolicy()

    @app.put(
        TASK_PATH,
        operation_id="put_task",
        summary="Create a task (again: the same body changes nothing)",
        status_code=201,
        response_model=Task,
        response_description="the task, created",
        responses={
            200: {"model": Task, "description": "the same body was sent before"},
            **errors(400, 404, 409, *_ANY),
        },
    )
    async def put_task(
        agent: Worker, task: TaskId, body: TaskBody, request: Request, response: Response
    ) -> Any:
        check_id(task, "task")
        _delegated(request, body, agent, host.delegators)
        with contextlib.suppress(NotFound):
            # Another caller's id is not reused, nor another caller's instance given work.
            _permitted(request, await host.get(task), policy, "write")
        if body.instance is not None:
            check_instance_name(body.instance)
            with contextlib.suppress(NotFound):
                _instance_permitted(request, await host.instance(agent, body.instance))
        record, created = await host.put(
            agent,
            task,
            _spec(agent, body),
            instance=body.instance,
            created_by=caller_of(request.scope),
        )
        response.status_code = 201 if created else 200
        return task_json(_permitted(request, record, policy, "write"))

    @app.get(
        "/v1/tasks/{task}",
        operation_id="get_task",
        summary="A task's record; with wait, once it is final (or as it stands after wait)",
        response_model=Task,
        responses=errors(404, *_ANY),
    )
    async def get_task(task: TaskId, request: Request, wait: Wait = None) -> Any:
        check_id(task, "task")
        _permitted(request, await host.get(task), policy, "read")
        record = await (host.wait(task, wait) if wait else host.get(task))
        return task_json(record)

    @app.post(
        "/v1/tasks/{task}/cancel",
        operation_id="cancel_task",
        summary="Cancel a task (cancel_requested while the iteration in progress ends)",
        response_model=Task,
        responses=errors(404, 409, *_ANY),
    )
    async def cancel_task(task: TaskId, request: Request) -> Any:
        check_id(task, "task")
        _permitted(request, await host.get(task), policy, "write")
        return task_json(await host.cancel(task))

    @app.post(
        f"{INSTANCE_PATH}/{{operation}}",
        operation_id="operate_instance",
        summary="Suspend, resume or terminate an instance",
        response_model=Instance,
        responses=errors(404, 409, *_ANY),
    )
    async def operate(
        agent: Worker, instance: InstanceId, operation: Operation, request: Request
    ) -> Any:
        check_id(instance, "instance")
        with contextlib.suppress(NotFound):
            _instance_permitted(request, await host.instance(agent, instance))
        view = await host.set_instance(agent, instance, _OPERATIONS[operation])
        return instance_json(view)

    @app.get(
        INSTANCE_PATH,
        operation_id="get_instance",
        summary="An instance and its queue",
        response_model=Instance,
        responses=errors(404, *_ANY),
    )
    async def get_instance(agent: Worker, instance: InstanceId, request: Request) -> Any:
        check_id(instance, "instance")
        return instance_json(_instance_permitted(request, await host.instance(agent, instance)))

    async def notifications(
        key: tuple[str, ...],
        snapshot: Callable[[], Awaitable[tuple[bytes, bool]]],
        seconds: float | None,
        ended: Ended | None = None,
    ) -> Response:
        # Subscribed before the snapshot is read, so nothing falls between the two.
        subscription = host.notifier.add(key)
        try:
            first, done = await snapshot()
        except BaseException:
            host.notifier.remove(key, subscription)
            raise

        if done:
            return follow(host.notifier, key, subscription, _once(first))

        async def again() -> bytes:
            return (await snapshot())[0]

        task = key[1] if key[0] == "task" else None
        events = event_stream(
            subscription, first, ended=ended, seconds=seconds, task=task, again=again
        )
        return follow(host.notifier, key, subscription, events)

    @app.get(
        "/v1/tasks/{task}/notifications",
        operation_id="task_notifications",
        summary="A task's events, live; ends after its final event, or after wait",
        response_class=EventStream,
        responses={**stream_answers("the task's events", TASK_EVENTS), **errors(404)},
    )
    async def task_notifications(task: TaskId, request: Request, wait: Wait = None) -> Response:
        check_id(task, "task")
        _permitted(request, await host.get(task), policy, "read")

        async def snapshot() -> tuple[bytes, bool]:
            record = await host.get(task)
            return sse("snapshot", task_json(record)), record.final

        async def ended() -> Notice | None:
            record = await host.get(task)
            if not record.final:
                return None
            return host.notifier.notice(
                f"task_{record.state.value}",  # as the final event is published
                agent=record.spec.agent,
                instance=record.instance,
                task=task,
                reason=record.reason,
            )

        return await notifications(("task", task), snapshot, wait, ended)

    @app.get(
        f"{INSTANCE_PATH}/notifications",
        operation_id="instance_notifications",
        summary="An instance's events, live; never ends by itself, only after wait",
        response_class=EventStream,
        responses={**stream_answers("the instance's events", TASK_EVENTS), **errors(404)},
    )
    async def instance_notifications(
        agent: Worker, instance: InstanceId, request: Request, wait: Wait = None
    ) -> Response:
        check_id(instance, "instance")
        _instance_permitted(request, await host.instance(agent, instance))

        async def snapshot() -> tuple[bytes, bool]:
            view = await host.instance(agent, instance)
            return sse("snapshot", instance_json(view)), False

        return await notifications(("instance", agent, instance), snapshot, wait)
