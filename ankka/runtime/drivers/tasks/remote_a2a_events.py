"""A remote A2A child's own events, relayed into its parent's notification stream.

The A2A counterpart of :mod:`.remote_events` (a peer runtime's child): for as long as
:class:`~ankka.runtime.drivers.tasks.remote_a2a.A2AChildren` follows a child delegated to a
remote A2A agent, :func:`relay_a2a_events` also subscribes to the child's A2A task
(``SubscribeToTask``, through the official SDK's client:
:meth:`~ankka.runtime.providers.a2a_remote.RemoteAgents.task_events`) and hands each update on
through the same core (:func:`~.remote_events.hand_on`: the bound, the ids, the end), once
:func:`told_of` has said it as a notification's fields:

- a status update ``submitted`` is ``task_assigned``, ``working`` is ``task_started``, each
  with ``state`` (the A2A state's name), ``message`` (its status message's text, when it has
  one) and ``timestamp`` (the status's, when it has one): an agent that says ``working`` again
  with another message is told again;
- an artifact update is ``task_artifact``: ``artifact`` (its id), ``name``, ``text`` (its
  text, or its data as JSON), ``append`` and ``last_chunk``, as the agent streams it;
- an update to a state the delegation ends in (``completed``, ``canceled``, ``failed``,
  ``rejected``, ``input_required``, ``auth_required``: what the follow settles) is the child's
  end: not relayed, it ends the relay (the end is told once, when settled, after it);
- the task the subscription opens with is the task as it is then, like a stream's snapshot:
  not relayed (a task already at its end ends the relay); messages are not relayed.

The ``event_id`` is ``{child}/{event}/{digest of those fields}``, so two processes on one
store subscribed to the same task tell it once. Live only, as the HTTP relay: what the agent
says while no subscription is open (before the A2A task is known, this runtime restarting,
the agent away, a subscription broken) is not told afterwards; an agent whose card does not
say it streams has nothing relayed.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import httpx
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import A2AError

from ankka._kernel.errors import StoreError
from ankka.runtime.drivers.tasks.notify import Notifier
from ankka.runtime.drivers.tasks.remote_events import Limit, relay_stream
from ankka.runtime.providers.a2a_remote import ENDS, parts_value

__all__ = ["relay_a2a_events", "told_of"]

log = logging.getLogger("ankka.runtime.tasks")

_GOING = {pb.TASK_STATE_SUBMITTED: "task_assigned", pb.TASK_STATE_WORKING: "task_started"}
# The delegation's end (remote_a2a.outcome_of_remote), as the core knows an end.
_END_EVENTS = {"completed": "task_completed", "canceled": "task_cancelled"}

Find = Callable[[str], Awaitable[str | None]]
"""The A2A task a child became, once the agent answered its message (None before)."""
Subscribe = Callable[[str], AsyncGenerator[pb.StreamResponse, None]]
"""An A2A task's events from now on."""


def _end(child: str, agent: str, state: int) -> dict[str, Any] | None:
    kind = ENDS.get(state)
    if kind is None:
        return None
    return {"event": _END_EVENTS.get(kind, "task_failed"), "task": child, "agent": agent}


def _said(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def told_of(child: str, agent: str, response: pb.StreamResponse) -> dict[str, Any] | None:
    """One of the child's A2A updates (``response``) as a notification's fields (see the
    module), for :func:`~.remote_events.hand_on`; None for what is not relayed."""
    kind = response.WhichOneof("payload")
    if kind == "task":
        return _end(child, agent, response.task.status.state)
    if kind == "status_update":
        status = response.status_update.status
        end = _end(child, agent, status.state)
        if end is not None or status.state not in _GOING:
            return end
        state = pb.TaskState.Name(status.state).removeprefix("TASK_STATE_").lower()
        told: dict[str, Any] = {
            "event": _GOING[status.state], "task": child, "agent": agent, "state": state
        }  # fmt: skip
        if status.HasField("message"):
            told["message"] = _said(parts_value(status.message.parts))
        if status.HasField("timestamp"):
            told["timestamp"] = status.timestamp.ToJsonString()
        return told
    if kind == "artifact_update":
        update = response.artifact_update
        return {
            "event": "task_artifact", "task": child, "agent": agent,
            "artifact": update.artifact.artifact_id, "name": update.artifact.name,
            "text": _said(parts_value(update.artifact.parts)), "append": update.append,
            "last_chunk": update.last_chunk,
        }  # fmt: skip
    return None  # a message: not a task's update


async def relay_a2a_events(
    notifier: Notifier,
    child: str,
    agent: str,
    *,
    find: Find,
    subscribe: Subscribe,
    limit: Limit | None = None,
    pause: Callable[[int], Awaitable[None]] | None = None,
) -> None:
    """Relay ``child``'s A2A updates from ``agent`` (see the module) until one says the
    child's end, or until cancelled (the child no longer followed). Until its A2A task is
    known, and whenever a subscription breaks or is refused, it looks again, ever later
    (:func:`~.remote_events.relay_stream`)."""

    async def told() -> AsyncGenerator[dict[str, Any] | None, None]:
        task_id = await find(child)
        if task_id is None:
            return  # its message not answered yet
        async with contextlib.aclosing(subscribe(task_id)) as events:
            async for response in events:
                if not response.HasField("task"):
                    yield None  # live: the task the subscription opens with does not say so
                said = told_of(child, agent, response)
                if said is not None:
                    yield said

    again = (A2AClientError, A2AError, httpx.HTTPError, StoreError, OSError)
    try:
        await relay_stream(notifier, child, agent, told, again=again, limit=limit, pause=pause)
    except NotImplementedError:  # the SDK's word for an agent whose card does not stream
        log.info("remote A2A child %s at %s: the agent does not stream; its events are not "
                 "relayed", child, agent)  # fmt: skip
