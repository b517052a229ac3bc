"""A remote A2A child's own updates, relayed into its parent's stream (remote_a2a_events.py):
each A2A update said as a notification's fields, through the HTTP relay's core (its ids, its
bound, its end), and a relay that fails is one warning (over two real runtimes:
tests/integration/a2a/test_delegation_a2a.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2 as pb
from google.protobuf import struct_pb2

from ankka.runtime.drivers.tasks.notify import Notice
from ankka.runtime.drivers.tasks.remote_a2a_events import relay_a2a_events, told_of
from ankka.runtime.drivers.tasks.remote_events import Limit, guarded
from tests.unit.runtime.drivers.tasks.test_remote_events import handed_on, no_pause

CHILD = "r1:1.0"
TASK = "a2a-1"


def status(state: int, text: str | None = None, at: str | None = None) -> pb.StreamResponse:
    update = pb.TaskStatusUpdateEvent(task_id=TASK, context_id="c")
    update.status.state = state  # type: ignore[assignment]
    if text is not None:
        update.status.message.CopyFrom(
            pb.Message(message_id="m", role=pb.ROLE_AGENT, parts=[pb.Part(text=text)])
        )
    if at is not None:
        update.status.timestamp.FromJsonString(at)
    return pb.StreamResponse(status_update=update)


def artifact(part: pb.Part, *, append: bool = False, last: bool = True) -> pb.StreamResponse:
    update = pb.TaskArtifactUpdateEvent(
        task_id=TASK, context_id="c", append=append, last_chunk=last,
        artifact=pb.Artifact(artifact_id=f"{TASK}:result", name="result", parts=[part]),
    )  # fmt: skip
    return pb.StreamResponse(artifact_update=update)


def snapshot(state: int) -> pb.StreamResponse:
    task = pb.Task(id=TASK, context_id="c")
    task.status.state = state  # type: ignore[assignment]
    return pb.StreamResponse(task=task)


def test_a_status_update_at_work_is_the_childs_assignment_or_start_with_what_it_said() -> None:
    at = "2026-12-04T01:00:00Z"
    assert told_of(CHILD, "researcher", status(pb.TASK_STATE_SUBMITTED)) == {
        "event": "task_assigned", "task": CHILD, "agent": "researcher", "state": "submitted",
    }  # fmt: skip
    assert told_of(CHILD, "researcher", status(pb.TASK_STATE_WORKING, "looking", at)) == {
        "event": "task_started", "task": CHILD, "agent": "researcher", "state": "working",
        "message": "looking", "timestamp": at,
    }  # fmt: skip


def test_an_artifact_update_is_told_with_its_text_or_its_data_as_json() -> None:
    data = pb.Part(data=struct_pb2.Value(struct_value=struct_pb2.Struct()))
    data.data.struct_value.update({"title": "sqlite"})
    assert told_of(CHILD, "researcher", artifact(pb.Part(text="Sum"), last=False)) == {
        "event": "task_artifact", "task": CHILD, "agent": "researcher",
        "artifact": f"{TASK}:result", "name": "result", "text": "Sum", "append": False,
        "last_chunk": False,
    }  # fmt: skip
    told = told_of(CHILD, "researcher", artifact(data, append=True))
    assert told is not None and told["text"] == '{"title": "sqlite"}' and told["append"]


@pytest.mark.parametrize(
    ("state", "event"),
    [(pb.TASK_STATE_COMPLETED, "task_completed"), (pb.TASK_STATE_CANCELED, "task_cancelled"),
     (pb.TASK_STATE_FAILED, "task_failed"), (pb.TASK_STATE_REJECTED, "task_failed"),
     (pb.TASK_STATE_INPUT_REQUIRED, "task_failed"), (pb.TASK_STATE_AUTH_REQUIRED, "task_failed")],
)  # fmt: skip
def test_an_update_to_a_state_the_delegation_ends_in_is_the_childs_end(
    state: int, event: str
) -> None:
    ended = {"event": event, "task": CHILD, "agent": "researcher"}
    assert told_of(CHILD, "researcher", status(state, "done")) == ended
    assert told_of(CHILD, "researcher", snapshot(state)) == ended  # subscribed after its end


def test_the_task_a_subscription_opens_with_and_messages_are_not_relayed() -> None:
    message = pb.Message(message_id="m", role=pb.ROLE_AGENT, parts=[pb.Part(text="hi")])
    assert told_of(CHILD, "researcher", snapshot(pb.TASK_STATE_WORKING)) is None
    assert told_of(CHILD, "researcher", pb.StreamResponse(message=message)) is None
    assert told_of(CHILD, "researcher", status(pb.TASK_STATE_UNSPECIFIED)) is None


class Agent:
    """The A2A agent's side: the task id once its message was answered, and one list of
    updates per subscription (one that ends in an exception breaks there)."""

    def __init__(self, *subscriptions: list[pb.StreamResponse | Exception]) -> None:
        self.subscriptions, self.asked = list(subscriptions), 0

    async def find(self, task: str) -> str | None:
        assert task == CHILD
        self.asked += 1
        return TASK if self.asked > 1 else None  # the first look: not answered yet

    async def subscribe(self, task_id: str) -> AsyncGenerator[pb.StreamResponse, None]:
        assert task_id == TASK
        if not self.subscriptions:
            await asyncio.Event().wait()
        for item in self.subscriptions.pop(0):
            if isinstance(item, Exception):
                raise item
            yield item


async def relay(agent: Agent, limit: Limit | None = None) -> list[Notice]:
    return await handed_on(
        lambda notifier: relay_a2a_events(
            notifier,
            CHILD,
            "researcher",
            find=agent.find,
            subscribe=agent.subscribe,
            limit=limit,
            pause=no_pause,
        )
    )


async def test_updates_told_again_after_a_broken_subscription_are_relayed_once() -> None:
    working = status(pb.TASK_STATE_WORKING, "looking", "2026-12-04T01:00:00Z")
    agent = Agent(
        [snapshot(pb.TASK_STATE_SUBMITTED), working, A2AClientError("the stream broke")],
        # Subscribed again: the task as it is, the same update again, the result, the end.
        [snapshot(pb.TASK_STATE_WORKING), working, artifact(pb.Part(text="done")),
         status(pb.TASK_STATE_COMPLETED)],
    )  # fmt: skip
    got = await relay(agent)
    assert [(n.event, n.task, n.agent) for n in got] == [
        ("task_started", CHILD, "researcher"),
        ("task_artifact", CHILD, "researcher"),
    ]
    assert {n.data["remote"] for n in got} == {"researcher"}
    assert [n.data["event_id"].rsplit("/", 1)[0] for n in got] == [
        f"{CHILD}/task_started",
        f"{CHILD}/task_artifact",
    ]


async def test_a_chatty_agent_is_cut_to_the_limit_and_the_next_update_says_how_many() -> None:
    pieces = [artifact(pb.Part(text=f"piece {i}"), append=True, last=False) for i in range(6)]
    now = [0.0]
    limit = Limit(rate=1.0, burst=2.0, clock=lambda: now[0])

    class Later(Agent):
        async def subscribe(self, task_id: str) -> AsyncGenerator[pb.StreamResponse, None]:
            if len(self.subscriptions) == 1:
                now[0] += 10.0  # the second subscription comes later: the bucket is full again
            async for item in super().subscribe(task_id):
                yield item

    agent = Later([*pieces[:4], A2AClientError("broke")],
                  [*pieces[4:], status(pb.TASK_STATE_COMPLETED)])  # fmt: skip
    got = await relay(agent, limit)
    assert [n.data["text"] for n in got] == ["piece 0", "piece 1", "piece 4", "piece 5"]
    assert [n.data.get("skipped") for n in got] == [None, None, 2, None]


async def test_an_agent_that_does_not_stream_has_nothing_relayed() -> None:
    class Silent(Agent):
        async def subscribe(self, task_id: str) -> AsyncGenerator[pb.StreamResponse, None]:
            raise NotImplementedError("client and/or server do not support resubscription.")
            yield  # an async generator

    assert await relay(Silent()) == []


async def test_a_relay_that_fails_is_one_warning_naming_the_child_and_its_peer_no_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def failing() -> None:
        raise ValueError("Illegal header value b'Bearer s3cret-token'")

    done = asyncio.Event()
    with caplog.at_level(logging.INFO, logger="ankka.runtime.tasks"):
        await guarded(failing(), child=CHILD, peer="researcher", done=done)  # does not raise
    assert done.is_set()  # the child's end is not held for it
    warned: list[Any] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1
    said = warned[0].getMessage()
    assert CHILD in said and "researcher" in said and "ValueError" in said
    assert "s3cret" not in caplog.text


async def test_a_relay_cancelled_with_its_follow_is_no_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done = asyncio.Event()
    running = asyncio.create_task(
        guarded(asyncio.Event().wait(), child=CHILD, peer="researcher", done=done)
    )
    await asyncio.sleep(0)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert done.is_set()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
