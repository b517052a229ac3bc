"""The official A2A client (``a2a-sdk`` 1.3.0) against ``ankka serve``: it finds an agent by
its card, sends over both bindings, streams, subscribes again after a kill -9, and receives
push notifications at a webhook this test runs."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from tests.integration.conftest import Script, received
from tests.support.eventually import eventually, eventually_async
from tests.support.processes import Server
from tests.support.webhook import webhook

pytestmark = pytest.mark.integration

CHAT = "tests.integration.a2a.services:chat"
APPROVALS = "tests.integration.a2a.services:approvals"
RESEARCH = "tests.integration.a2a.services:research"
V1 = {"A2A-Version": "1.0"}


def _message(text: str, message_id: str, **fields: Any) -> pb.Message:
    return pb.Message(
        message_id=message_id, role=pb.ROLE_USER, parts=[pb.Part(text=text)], **fields
    )


async def _client(base: str, binding: str, *, streaming: bool) -> Any:
    config = ClientConfig(
        streaming=streaming,
        supported_protocol_bindings=[binding],
        # A stream may be quiet for longer than httpx's default 5 s while a tool runs.
        httpx_client=httpx.AsyncClient(timeout=60),
    )
    return await create_client(base, client_config=config)


async def _send(client: Any, request: pb.SendMessageRequest) -> list[pb.StreamResponse]:
    events: list[pb.StreamResponse] = []
    stream: AsyncIterator[pb.StreamResponse] = client.send_message(request)
    async for event in stream:
        events.append(event)
    return events


def _research_script(count: int) -> Script:
    turns: list[dict[str, Any]] = []
    for index in range(count):
        turns.append(
            {
                "when": "user",
                "tool_calls": [{"name": "lookup", "arguments": {"topic": f"topic {index}"}}],
            }
        )
        turns.append({"when": "tool", "tool_calls": [{"name": "complete_task", "arguments": {
            "title": f"topic {index}", "points": ["it is known"]}}]})  # fmt: skip
    return turns


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_the_sdk_client_finds_the_agent_and_gets_a_completed_task(
    standin: Callable[[Script], Server], serve: Callable[..., Server], binding: str
) -> None:
    model = standin([{"text": "Sunny, 21 degrees."}])
    server = serve(model.url, target=CHAT)
    async with httpx.AsyncClient() as plain:
        card = (await plain.get(f"{server.url}/.well-known/agent-card.json")).json()
    assert card["name"] == "echo"
    assert card["supportedInterfaces"][0]["url"] == f"{server.url}/a2a/echo"
    client = await _client(f"{server.url}/a2a/echo", binding, streaming=False)
    async with client:
        events = await _send(client, pb.SendMessageRequest(message=_message("Weather?", "m-1")))
        assert len(events) == 1
        task = events[0].task
        assert task.status.state == pb.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "Sunny, 21 degrees."
        again = await client.get_task(pb.GetTaskRequest(id=task.id))
        assert again.status.state == pb.TASK_STATE_COMPLETED
        assert [m.role for m in again.history] == [pb.ROLE_USER, pb.ROLE_AGENT]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_a_streamed_turn_opens_with_the_task_and_ends_completed(
    standin: Callable[[Script], Server], serve: Callable[..., Server], binding: str
) -> None:
    model = standin([{"text": "Sunny and warm today."}])
    server = serve(model.url, target=CHAT)
    client = await _client(f"{server.url}/a2a/echo", binding, streaming=True)
    async with client:
        events = await _send(client, pb.SendMessageRequest(message=_message("Weather?", "m-s")))
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task"
    assert kinds[-1] == "status_update"
    assert events[-1].status_update.status.state == pb.TASK_STATE_COMPLETED
    pieces = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    streamed = "".join(p.text for artifact in pieces for p in artifact.parts)
    assert "Sunny and warm today." in streamed


async def test_a_message_sent_twice_is_answered_once(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin([{"text": "first answer"}, {"text": "second answer"}])
    server = serve(model.url, target=CHAT)
    client = await _client(f"{server.url}/a2a/echo", "JSONRPC", streaming=False)
    async with client:
        request = pb.SendMessageRequest(message=_message("Weather?", "m-twice"))
        first = (await _send(client, request))[0].task
        second = (await _send(client, request))[0].task
    assert first.id == second.id
    assert second.artifacts[0].parts[0].text == "first answer"
    assert len(received(model)) == 1


async def test_a_message_id_sent_twice_to_an_autonomous_agent_is_one_task(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin(_research_script(2))
    server = serve(model.url, target=RESEARCH)
    client = await _client(f"{server.url}/a2a/researcher", "JSONRPC", streaming=False)
    async with client:
        first = await _send(client, pb.SendMessageRequest(message=_message("ankka", "d-1")))
        again = await _send(client, pb.SendMessageRequest(message=_message("other", "d-1")))
        listed = await client.list_tasks(pb.ListTasksRequest())
    assert first[0].task.id == again[0].task.id
    assert again[0].task.status.state == pb.TASK_STATE_COMPLETED
    assert [t.id for t in listed.tasks] == [first[0].task.id]


def test_an_unsupported_version_is_refused_and_none_means_0_3(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    server = serve(standin([]).url, target=CHAT)
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    for headers in ({}, {"A2A-Version": "2.0"}):
        answer = httpx.post(f"{server.url}/a2a/echo", json=body, headers=headers).json()
        assert answer["error"]["code"] == -32009, answer
    missing = httpx.post(f"{server.url}/a2a/echo", json=body, headers=V1).json()
    assert missing["error"]["code"] == -32001


async def test_a_pending_approval_is_input_required_and_the_next_message_decides(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin([
        {"tool_calls": [{"name": "refund", "arguments": {"order": "A-1", "amount": 250}}]},
        {"text": "Refunded 250 on A-1."},
    ])  # fmt: skip
    server = serve(model.url, target=APPROVALS)
    client = await _client(f"{server.url}/a2a/refunds", "JSONRPC", streaming=False)
    async with client:
        task = (await _send(client, pb.SendMessageRequest(message=_message("Refund", "r-1"))))[
            0
        ].task
        assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
        status = json_format.MessageToDict(task.status.message.parts[0].data)
        assert status["awaitingApproval"][0]["tool"] == "refund"
        decision = _message("approve", "r-2", task_id=task.id, context_id=task.context_id)
        done = (await _send(client, pb.SendMessageRequest(message=decision)))[0].task
    assert done.id == task.id
    assert done.status.state == pb.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "Refunded 250 on A-1."


async def test_an_autonomous_agents_task_streams_to_its_result(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin(_research_script(1))
    server = serve(model.url, target=RESEARCH)
    client = await _client(f"{server.url}/a2a/researcher", "HTTP+JSON", streaming=True)
    async with client:
        events = await _send(client, pb.SendMessageRequest(message=_message("ankka", "t-1")))
    assert events[0].WhichOneof("payload") == "task"
    assert events[-1].status_update.status.state == pb.TASK_STATE_COMPLETED
    result = next(e.artifact_update.artifact for e in events if e.HasField("artifact_update"))
    assert json_format.MessageToDict(result.parts[0].data)["title"] == "topic 0"


def _states(hook_bodies: list[dict[str, Any]], task: str) -> list[tuple[str, str]]:
    return [
        (b["statusUpdate"]["metadata"]["eventId"], b["statusUpdate"]["status"]["state"])
        for b in hook_bodies
        if "statusUpdate" in b and b["statusUpdate"]["taskId"] == task
    ]


async def test_push_events_reach_the_webhook_with_stable_ids_after_retries(
    standin: Callable[[Script], Server], serve: Callable[..., Server]
) -> None:
    model = standin(_research_script(1))
    server = serve(model.url, target=RESEARCH)
    with webhook() as hook:
        hook.fail_next = 2  # the first two deliveries are refused: they must be tried again
        client = await _client(f"{server.url}/a2a/researcher", "JSONRPC", streaming=False)
        push = pb.TaskPushNotificationConfig(url=hook.url, token="hook-token-1")
        config = pb.SendMessageConfiguration(
            task_push_notification_config=push, return_immediately=True
        )
        async with client:
            request = pb.SendMessageRequest(message=_message("ankka", "p-1"), configuration=config)
            task = (await _send(client, request))[0].task
            listed = await client.list_task_push_notification_configs(
                pb.ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
        assert listed.configs[0].url == hook.url
        assert not listed.configs[0].token  # a secret is sent, never shown back

        def completed() -> list[tuple[str, str]]:
            states = _states(hook.bodies(), task.id)
            return states if states and states[-1][1] == "TASK_STATE_COMPLETED" else []

        states = eventually(completed, what="the completed event at the webhook", timeout=60)
        ids = [event_id for event_id, _ in states]
        assert ids == sorted(set(ids), key=lambda i: int(i.rsplit(":", 1)[1]))
        assert all(r.headers["x-a2a-notification-token"] == "hook-token-1" for r in hook.received)


async def test_after_kill_9_a_new_subscription_gets_the_remaining_events_in_order(
    standin: Callable[[Script], Server], serve: Callable[..., Server], tmp_path: Path
) -> None:
    model = standin(_research_script(1))
    # Long enough that the restarted runtime, which resumes the task (and runs its tool again)
    # as it starts, is still at work when the new subscription comes, even on a loaded machine.
    env = {"ANKKA_TEST_TOOL_SECONDS": "12"}
    store = f"sqlite:///{tmp_path / 'a2a.sqlite3'}"
    first = serve(model.url, target=RESEARCH, store=store, env=env)
    base = f"{first.url}/a2a/researcher"
    with webhook() as hook:
        config = pb.SendMessageConfiguration(
            task_push_notification_config=pb.TaskPushNotificationConfig(url=hook.url),
            return_immediately=True,
        )
        client = await _client(base, "JSONRPC", streaming=True)
        async with client:
            request = pb.SendMessageRequest(message=_message("ankka", "k-1"), configuration=config)
            stream = client.send_message(request)
            task = (await anext(stream)).task
            await stream.aclose()

        def tool_running() -> bool:
            # The runtime's own API: the model's first answer is recorded, its tool runs.
            record = httpx.get(f"{first.url}/v1/tasks/{task.id}").json()
            return bool(record["state"] == "in-progress" and record["iterations"]["used"] >= 1)

        eventually(tool_running, what="the task's tool at work", timeout=30)
        os.kill(first.process.pid, signal.SIGKILL)
        first.process.wait()
        second = serve(model.url, target=RESEARCH, store=store, env=env)
        client = await _client(f"{second.url}/a2a/researcher", "JSONRPC", streaming=True)
        async with client:
            events = [e async for e in client.subscribe(pb.SubscribeToTaskRequest(id=task.id))]
        assert events[0].WhichOneof("payload") == "task"
        states = [e.status_update.status.state for e in events if e.HasField("status_update")]
        assert states[-1] == pb.TASK_STATE_COMPLETED
        assert pb.TASK_STATE_SUBMITTED not in states  # nothing from before it went back

        async def delivered() -> list[tuple[str, str]]:
            states = _states(hook.bodies(), task.id)
            return states if states and states[-1][1] == "TASK_STATE_COMPLETED" else []

        await eventually_async(delivered, what="the completed push", timeout=60)
        # Every event (status and artifact updates alike) arrived, at least once, in order.
        numbers = [
            int(event["metadata"]["eventId"].rsplit(":", 1)[1])
            for body in hook.bodies()
            for event in body.values()
            if event["taskId"] == task.id
        ]
        assert numbers == sorted(numbers)
        assert sorted(set(numbers)) == list(range(1, max(numbers) + 1)), numbers


def test_with_tokens_the_card_is_open_says_bearer_and_a_call_needs_a_token(
    standin: Callable[[Script], Server], serve: Callable[..., Server], tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("ann ann-token-0123456789abcdef\n")
    model = standin([{"text": "Sunny."}])
    server = serve(model.url, target=CHAT, args=["--token-file", str(tokens)])
    card = httpx.get(f"{server.url}/a2a/echo/.well-known/agent-card.json").json()
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "Hi"}]}},
    }
    refused = httpx.post(f"{server.url}/a2a/echo", json=body, headers=V1)
    assert refused.status_code == 401
    token = {**V1, "Authorization": "Bearer ann-token-0123456789abcdef"}
    answer = httpx.post(f"{server.url}/a2a/echo", json=body, headers=token).json()
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    other = {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}}
    listed = httpx.post(f"{server.url}/a2a/echo", json=other, headers=token).json()
    assert len(listed["result"]["tasks"]) == 1


def _send_rpc(base: str, message_id: str, context: str) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": message_id,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": message_id,
                "contextId": context,
                "role": "ROLE_USER",
                "parts": [{"text": "Weather?"}],
            }
        },
    }
    answer: dict[str, Any] = httpx.post(base, json=body, headers=V1, timeout=60).json()
    return answer


def test_a_turn_committed_just_before_a_crash_is_answered_from_the_journal(
    standin: Callable[[Script], Server], serve: Callable[..., Server], tmp_path: Path
) -> None:
    """The durable state of a kill -9 between the turn's commit and its row's update: the row
    still says submitted, claimed by a process that is gone. The message sent again after the
    restart is answered from the journal; the model is not asked again."""
    import sqlite3

    model = standin([{"text": "Sunny, once."}, {"text": "asked twice"}])
    path = tmp_path / "crash.sqlite3"
    first = serve(model.url, target=CHAT, store=f"sqlite:///{path}")
    done = _send_rpc(f"{first.url}/a2a/echo", "c-1", "ctx-crash")
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait()
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE ankka_a2a_tasks SET state = 'submitted', body = ?, owner = 'gone'",
            (json.dumps({"text": "Weather?"}),),
        )
    second = serve(model.url, target=CHAT, store=f"sqlite:///{path}")
    again = _send_rpc(f"{second.url}/a2a/echo", "c-1", "ctx-crash")
    task = again["result"]["task"]
    assert task["id"] == done["result"]["task"]["id"]
    assert task["artifacts"][0]["parts"][0]["text"] == "Sunny, once."
    assert len(received(model)) == 1
    messages = httpx.get(f"{second.url}/v1/sessions/ctx-crash/messages").json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]


def test_a_turn_cut_off_by_a_crash_runs_again_when_its_message_comes_again(
    standin: Callable[[Script], Server], serve: Callable[..., Server], tmp_path: Path
) -> None:
    model = standin([{"text": "never heard", "delay_ms": 20000}, {"text": "Sunny, at last."}])
    store = f"sqlite:///{tmp_path / 'cut.sqlite3'}"
    first = serve(model.url, target=CHAT, store=store)
    body = {
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": "cut-1", "contextId": "ctx-cut", "role": "ROLE_USER",
                               "parts": [{"text": "Weather?"}]},
                   "configuration": {"returnImmediately": True}},
    }  # fmt: skip
    httpx.post(f"{first.url}/a2a/echo", json=body, headers=V1, timeout=30)
    eventually(lambda: len(received(model)) == 1, what="the model asked", timeout=30)
    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait()
    second = serve(model.url, target=CHAT, store=store)
    again = _send_rpc(f"{second.url}/a2a/echo", "cut-1", "ctx-cut")
    assert again["result"]["task"]["artifacts"][0]["parts"][0]["text"] == "Sunny, at last."
    messages = httpx.get(f"{second.url}/v1/sessions/ctx-cut/messages").json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
