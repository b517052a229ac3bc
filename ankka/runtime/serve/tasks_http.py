"""The task routes of the runtime's HTTP API. Thin: parse, ask the :class:`TaskHost`, render.

- ``PUT /v1/agents/{agent}/tasks/{task}`` ``{"type", "instructions", "attachments"?,
  "depends_on"?, "instance"?}`` → 201 with the record (200 when the same body was sent before);
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
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ankka._kernel.errors import NotFound, RequestError
from ankka._kernel.identity import is_platform
from ankka.runtime.declare.autonomous import MAX_BUDGET, MAX_TOKENS
from ankka.runtime.declare.policy import NotPermitted, Right, SessionPolicy
from ankka.runtime.drivers.tasks.host import InstanceView, TaskHost
from ankka.runtime.drivers.tasks.notify import Dropped, Notice, Subscription
from ankka.runtime.records.delegation import TreeView
from ankka.runtime.records.tasks import (
    MAX_ATTACHMENT,
    MAX_ATTACHMENTS,
    MAX_DEPENDENCIES,
    MAX_ID,
    MAX_INSTRUCTIONS,
    Attachment,
    InstanceState,
    TaskBudget,
    TaskRecord,
    TaskSpec,
    check_id,
)
from ankka.runtime.serve.bodies import parse_body
from ankka.runtime.serve.identity import caller_of

__all__ = ["event_stream", "instance_json", "sse", "task_json", "task_routes", "wait_seconds"]

MAX_WAIT = 300.0
KEEP_ALIVE = 15.0
COST_UNKNOWN = "unknown"
MAX_NAME = 320  # a Kubernetes namespace (63) / a name (253)
_FINAL_EVENTS = {"task_completed", "task_failed", "task_cancelled"}
_OPERATIONS = {
    "suspend": InstanceState.SUSPENDED,
    "resume": InstanceState.ACTIVE,
    "terminate": InstanceState.TERMINATED,
}


class AttachmentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(default="", max_length=MAX_ID)
    text: str | None = Field(default=None, max_length=MAX_ATTACHMENT)
    ref: str | None = Field(default=None, max_length=2048)


class BudgetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    iterations: int | None = Field(default=None, ge=1, le=MAX_BUDGET)
    tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)


class TaskBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: str = Field(min_length=1, max_length=MAX_ID)
    instructions: str = Field(min_length=1, max_length=MAX_INSTRUCTIONS)
    attachments: list[AttachmentBody | str] = Field(
        default_factory=list, max_length=MAX_ATTACHMENTS
    )
    depends_on: list[str] = Field(default_factory=list, max_length=MAX_DEPENDENCIES)
    instance: str | None = Field(default=None, max_length=MAX_ID)
    budget: BudgetBody | None = None
    # A name for people (the operator sends the Task's <namespace>/<name>); the console shows it.
    name: str | None = Field(default=None, min_length=1, max_length=MAX_NAME)


def _spec(agent: str, body: TaskBody) -> TaskSpec:
    attachments: list[Attachment] = []
    for index, item in enumerate(body.attachments, 1):
        if isinstance(item, str):
            if len(item) > MAX_ATTACHMENT:
                raise RequestError(f"attachment {index} is longer than {MAX_ATTACHMENT} characters")
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
        name=body.name,
    )


async def _body(request: Request) -> TaskBody:
    return parse_body(
        await request.body(),
        TaskBody,
        '{"type", "instructions", "attachments"?, "depends_on"?, "instance"?, "name"?, "budget"?}',
    )


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


def wait_seconds(request: Request) -> float:
    raw = request.query_params.get("wait")
    if raw is None:
        return 0.0
    try:
        seconds = float(raw)
    except ValueError:
        raise RequestError(f"wait={raw!r} is not a number of seconds") from None
    if not 0 <= seconds <= MAX_WAIT:
        raise RequestError(f"wait must be 0 to {MAX_WAIT:g} seconds, not {raw}")
    return seconds


def sse(event: str, data: object, number: int | None = None) -> bytes:
    head = f"id: {number}\n" if number is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


# How often a task's stream, hearing nothing, reads the task's record: its end is told even
# when the notification of it was lost on the way from another process (the relay is live,
# not durable).
RECHECK = 5.0

Ended = Callable[[], Awaitable[Notice | None]]


async def event_stream(
    subscription: Subscription,
    snapshot: bytes,
    *,
    seconds: float | None,
    ended: Ended | None = None,
    keep: Callable[[Notice], Awaitable[bool]] | None = None,
    recheck: float = RECHECK,
    task: str | None = None,
) -> AsyncIterator[bytes]:
    """The stream: ``snapshot``, then the events (those ``keep`` keeps); for ``seconds``
    when given. ``ended``: a task's stream, which ends after the final event of ``task``
    (not a descendant's, whose events it carries too), or, heard of no other way, the end
    its record shows."""
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
        if keep is not None and not await keep(item):
            continue
        yield sse(item.event, item.as_dict(), item.number)
        if ended is not None and item.event in _FINAL_EVENTS and task in (None, item.task):
            return


def task_routes(host: TaskHost, policy: SessionPolicy | None = None) -> list[Route]:
    """The routes; their errors are answered by the app's one error handler. ``policy``: who
    may act on a task besides its creator and the platform (default: nobody)."""
    policy = policy or SessionPolicy()

    async def put_task(request: Request) -> Response:
        agent, task = request.path_params["agent"], request.path_params["task"]
        check_id(task, "task")
        body = await _body(request)
        with contextlib.suppress(NotFound):
            # Another caller's id is not reused, nor another caller's instance given work.
            _permitted(request, await host.get(task), policy, "write")
        if body.instance is not None:
            check_id(body.instance, "instance")
            with contextlib.suppress(NotFound):
                _instance_permitted(request, await host.instance(agent, body.instance))
        record, created = await host.put(
            agent,
            task,
            _spec(agent, body),
            instance=body.instance,
            created_by=caller_of(request.scope),
        )
        return JSONResponse(
            task_json(_permitted(request, record, policy, "write")),
            status_code=201 if created else 200,
        )

    async def get_task(request: Request) -> Response:
        task = check_id(request.path_params["task"], "task")
        seconds = wait_seconds(request)
        _permitted(request, await host.get(task), policy, "read")
        record = await (host.wait(task, seconds) if seconds else host.get(task))
        return JSONResponse(task_json(record))

    async def cancel_task(request: Request) -> Response:
        task = check_id(request.path_params["task"], "task")
        _permitted(request, await host.get(task), policy, "write")
        return JSONResponse(task_json(await host.cancel(task)))

    async def operate(request: Request) -> Response:
        operation = request.path_params["operation"]
        state = _OPERATIONS.get(operation)
        if state is None:
            raise RequestError(
                f"{operation!r} is not an instance operation: suspend, resume or terminate"
            )
        agent = request.path_params["agent"]
        instance = check_id(request.path_params["instance"], "instance")
        with contextlib.suppress(NotFound):
            _instance_permitted(request, await host.instance(agent, instance))
        view = await host.set_instance(agent, instance, state)
        return JSONResponse(instance_json(view))

    async def get_instance(request: Request) -> Response:
        agent = request.path_params["agent"]
        instance = check_id(request.path_params["instance"], "instance")
        view = _instance_permitted(request, await host.instance(agent, instance))
        return JSONResponse(instance_json(view))

    async def notifications(
        request: Request,
        key: tuple[str, ...],
        snapshot: Callable[[], Awaitable[tuple[bytes, bool]]],
        ended: Ended | None = None,
    ) -> Response:
        seconds = wait_seconds(request) if "wait" in request.query_params else None
        # Subscribed before the snapshot is read, so nothing falls between the two.
        subscription = host.notifier.add(key)
        try:
            first, done = await snapshot()
        except BaseException:
            host.notifier.remove(key, subscription)
            raise

        async def body() -> AsyncIterator[bytes]:
            try:
                if done:
                    yield first
                    return
                task = key[1] if key[0] == "task" else None
                events = event_stream(subscription, first, ended=ended, seconds=seconds, task=task)
                async for chunk in events:
                    yield chunk
            finally:
                host.notifier.remove(key, subscription)

        return StreamingResponse(
            body(), media_type="text/event-stream", headers={"cache-control": "no-cache"}
        )

    async def task_notifications(request: Request) -> Response:
        task = check_id(request.path_params["task"], "task")
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

        return await notifications(request, ("task", task), snapshot, ended)

    async def instance_notifications(request: Request) -> Response:
        agent = request.path_params["agent"]
        instance = check_id(request.path_params["instance"], "instance")
        _instance_permitted(request, await host.instance(agent, instance))

        async def snapshot() -> tuple[bytes, bool]:
            view = await host.instance(agent, instance)
            return sse("snapshot", instance_json(view)), False

        return await notifications(request, ("instance", agent, instance), snapshot)

    return [
        Route("/v1/agents/{agent}/tasks/{task}", put_task, methods=["PUT"]),
        Route("/v1/tasks/{task}", get_task, methods=["GET"]),
        Route("/v1/tasks/{task}/cancel", cancel_task, methods=["POST"]),
        Route("/v1/tasks/{task}/notifications", task_notifications, methods=["GET"]),
        Route(
            "/v1/agents/{agent}/instances/{instance}/notifications",
            instance_notifications,
            methods=["GET"],
        ),
        Route("/v1/agents/{agent}/instances/{instance}", get_instance, methods=["GET"]),
        Route(
            "/v1/agents/{agent}/instances/{instance}/{operation}",
            operate,
            methods=["POST"],
        ),
    ]
