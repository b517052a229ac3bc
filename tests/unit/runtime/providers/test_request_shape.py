"""Invariants on what the model is sent (ARCHITECTURE.md, "Cache-friendly, well-formed requests").

Checked on the Chat Completions bytes ankka actually builds, over a session of several turns
with tool rounds and two agents: the prefix is byte-identical from one call to the next, roles
alternate strictly, and each tool result directly follows the call that asked for it.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from ankka.runtime.declare.agents import Memory, Service, Turn, TurnRequest
from ankka.runtime.declare.tools import tool
from ankka.runtime.providers.base import ModelRequest
from ankka.runtime.providers.chat_wire import encode_request
from tests.unit.runtime.conftest import MakeRuntime, Script


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def two_agents() -> Service:
    service = Service("shape")

    @service.agent("main")
    def main(request: TurnRequest) -> Turn:
        return Turn(message=request.message, instructions="Be brief.", tools=[lookup])

    @service.agent("critic")
    def critic(request: TurnRequest) -> Turn:
        return Turn(message=request.message, instructions="Criticise.", memory=Memory.all())

    return service


def call(*keys: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "lookup", "arguments": {"key": k}} for k in keys]}


SCRIPT: Script = [
    call("a"),
    "answer one",
    call("b", "c"),
    call("d"),
    "answer two",
    "critique",
    "answer three",
]


async def run_session(make_runtime: MakeRuntime) -> list[ModelRequest]:
    runtime, provider = await make_runtime(two_agents(), SCRIPT)
    await runtime.run(runtime.plan("main", "s", "first"))
    await runtime.run(runtime.plan("main", "s", "second"))
    await runtime.run(runtime.plan("critic", "s", "review"))
    await runtime.run(runtime.plan("main", "s", "third"))
    assert provider.remaining == 0
    requests: list[ModelRequest] = provider.requests
    return requests


def wire(request: ModelRequest) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(encode_request(request, model="m", stream=False))
    return body


def message_bytes(request: ModelRequest) -> list[bytes]:
    """Each message as it is encoded inside the request body."""
    body = wire(request)
    return [
        json.dumps(m, ensure_ascii=False, separators=(",", ":")).encode() for m in body["messages"]
    ]


async def test_the_prefix_is_byte_identical_from_call_to_call(make_runtime: MakeRuntime) -> None:
    requests = await run_session(make_runtime)
    main_calls = [r for r in requests if r.instructions == "Be brief."]
    assert len(main_calls) == 6
    for earlier, later in itertools.pairwise(main_calls):
        old, new = (
            encode_request(earlier, model="m", stream=False),
            encode_request(later, model="m", stream=False),
        )
        old_messages = old[: old.index(b'],"tools":')]
        assert new.startswith(old_messages), "a later call rewrote earlier context"
        assert old[old.index(b'],"tools":') :] == new[new.index(b'],"tools":') :]


async def test_roles_alternate_strictly(make_runtime: MakeRuntime) -> None:
    for request in await run_session(make_runtime):
        roles = [m["role"] for m in wire(request)["messages"]]
        assert roles[0] == "system" and roles[1] == "user"
        assert "system" not in roles[1:]
        for a, b in itertools.pairwise(roles):
            assert a != b or a == "tool", f"two {a} messages in a row: {roles}"
            if b == "tool":
                assert a in ("assistant", "tool"), f"a tool result after {a}: {roles}"
        assert roles[-1] in ("user", "tool")


async def test_each_tool_result_follows_its_call(make_runtime: MakeRuntime) -> None:
    for request in await run_session(make_runtime):
        messages = wire(request)["messages"]
        for index, message in enumerate(messages):
            if message["role"] != "assistant" or "tool_calls" not in message:
                continue
            ids = [c["id"] for c in message["tool_calls"]]
            following = messages[index + 1 : index + 1 + len(ids)]
            assert [m.get("tool_call_id") for m in following] == ids
            assert all(m["role"] == "tool" for m in following)


async def test_the_critic_reads_the_whole_conversation_as_history(
    make_runtime: MakeRuntime,
) -> None:
    requests = await run_session(make_runtime)
    critic = next(r for r in requests if r.instructions == "Criticise.")
    contents = [m["content"] for m in wire(critic)["messages"] if m["role"] in ("user",)]
    assert contents == ["first", "second", "review"]
    sent = message_bytes(critic)
    assert sent[1:-2] == message_bytes(requests[4])[1:]
    assert [json.loads(m) for m in sent[-2:]] == [
        {"role": "assistant", "content": "answer two"},
        {"role": "user", "content": "review"},
    ]
