"""Remote A2A agents: the seam delegation calls to hand work to an agent of another platform.

``RemoteAgents.delegate(agent, key=..., text=...)`` sends the message once and follows the
remote task to an end, durably:

- the ``messageId`` is derived from ``key`` (the caller's stable name for this piece of work,
  e.g. the parent task and the tool call), so a message sent again is the same message;
- the remote task's id is written to the caller's :class:`Ledger` as soon as the remote answers
  the send, and a ``delegate`` that finds it there (after a restart) follows that task and
  sends nothing. Only a restart between the send and that record sends the message again,
  with the same ``messageId``: an agent that deduplicates by it (ankka does; the spec allows
  it) answers with the same task, another may start a second one;
- following is by subscription when the card says the agent streams, else by polling
  ``GetTask``; a broken stream (the remote restarted) is followed by polling until a new
  subscription holds, so nothing is missed: the end is read from the task itself;
- what the remote says becomes a typed :class:`RemoteOutcome`: ``completed`` (the result: the
  artifacts' text, or a data part's value), ``failed``, ``canceled``, ``rejected``,
  ``input_required``, ``auth_required``, ``unreachable`` (the deadline passed without an
  answer), or ``lost`` (the remote answered ``TaskNotFoundError`` for a task it had made: its
  store was lost), each with the remote task's id and a reason a caller can read.

Authentication: a bearer token read from a file at each use (a projected service-account
token rotates), or a client certificate (mTLS), as the :class:`RemoteAgent` names.

Trace context: every request carries the W3C context current when it is sent
(``traceparent``, ``tracestate``, ``baggage``: the delegating call's span when tracing is on),
so the remote's spans join the delegating task's trace; nothing when no span is current.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import ssl
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import A2AError, TaskNotFoundError
from google.protobuf import json_format

from ankka._kernel import tracing
from ankka.runtime.providers.remote_agents import RemoteAgent

__all__ = [
    "ENDS",
    "Ledger",
    "RemoteAgents",
    "RemoteOutcome",
    "message_id_for",
    "parts_value",
]

Kind = Literal[
    "completed", "failed", "canceled", "rejected", "input_required", "auth_required",
    "unreachable", "lost",
]  # fmt: skip
ENDS: dict[int, Kind] = {  # the states a delegation ends in
    pb.TASK_STATE_COMPLETED: "completed",
    pb.TASK_STATE_FAILED: "failed",
    pb.TASK_STATE_CANCELED: "canceled",
    pb.TASK_STATE_REJECTED: "rejected",
    pb.TASK_STATE_INPUT_REQUIRED: "input_required",
    pb.TASK_STATE_AUTH_REQUIRED: "auth_required",
}


@dataclass(frozen=True, slots=True)
class RemoteOutcome:
    kind: Kind
    task_id: str
    context_id: str
    result: object = None
    reason: str = ""


class Ledger(Protocol):
    """Where the caller keeps, durably, which remote task a piece of work became."""

    async def find(self, key: str) -> tuple[str, str] | None: ...  # (task id, context id)

    async def remember(self, key: str, task_id: str, context_id: str) -> None: ...


def message_id_for(key: str) -> str:
    return "ankka-" + hashlib.sha256(key.encode()).hexdigest()[:32]


def parts_value(parts: Any) -> object:
    """What parts say: a data part's value, else their texts joined."""
    texts: list[str] = []
    for part in parts:
        kind = part.WhichOneof("content")
        if kind == "data":
            return json_format.MessageToDict(part.data)
        if kind == "text":
            texts.append(part.text)
    return "\n".join(texts)


def outcome_of(task: pb.Task) -> RemoteOutcome | None:
    """The typed end of ``task``, or None while it is still at work."""
    kind = ENDS.get(task.status.state)
    if kind is None:
        return None
    reason = str(parts_value(task.status.message.parts)) if task.status.HasField("message") else ""
    result: object = None
    if kind == "completed":
        pieces = [parts_value(a.parts) for a in task.artifacts]
        result = pieces[0] if len(pieces) == 1 else "\n".join(str(p) for p in pieces)
    return RemoteOutcome(kind, task.id, task.context_id, result, reason)


class RemoteAgents:
    """Delegation's A2A client; an async context manager (it owns its HTTP client)."""

    def __init__(self, *, poll_seconds: float = 1.0, timeout: float = 30.0) -> None:
        self.poll = poll_seconds
        self.timeout = timeout
        self._clients: dict[str, tuple[Any, bool]] = {}  # agent -> (SDK client, streams)
        self._http: dict[str, httpx.AsyncClient] = {}

    async def __aenter__(self) -> RemoteAgents:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for client, _ in self._clients.values():
            with contextlib.suppress(Exception):
                await client.close()
        for http in self._http.values():
            await http.aclose()

    def _http_for(self, agent: RemoteAgent) -> httpx.AsyncClient:
        if agent.name not in self._http:
            verify: ssl.SSLContext | bool = True
            if agent.tls_cert is not None:
                verify = ssl.create_default_context(cafile=agent.tls_ca)
                verify.load_cert_chain(agent.tls_cert, agent.tls_key)
            self._http[agent.name] = httpx.AsyncClient(
                timeout=self.timeout, verify=verify, event_hooks={"request": [_traced]}
            )
        return self._http[agent.name]

    def _headers(self, agent: RemoteAgent) -> dict[str, str]:
        token = agent.token
        if agent.token_file is not None:
            token = Path(agent.token_file).read_text().strip()
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def _client(self, agent: RemoteAgent) -> tuple[Any, bool]:
        http = self._http_for(agent)
        http.headers.update(self._headers(agent))
        if agent.name not in self._clients:
            base, _, path = agent.card_url.partition("/.well-known/")
            resolver = A2ACardResolver(http, base, f"/.well-known/{path or 'agent-card.json'}")
            card = await resolver.get_agent_card()
            config = ClientConfig(streaming=True, httpx_client=http)
            client = ClientFactory(config).create(card)
            self._clients[agent.name] = (client, bool(card.capabilities.streaming))
        return self._clients[agent.name]

    async def delegate(
        self,
        agent: RemoteAgent,
        *,
        key: str,
        text: str,
        ledger: Ledger,
        deadline: float | None = None,
        data: dict[str, Any] | None = None,
    ) -> RemoteOutcome:
        """Send ``text`` to ``agent`` once for ``key`` and follow it to an end (or ``deadline``
        seconds, then ``unreachable``)."""
        try:
            async with asyncio.timeout(deadline):
                return await self._delegate(agent, key, text, ledger, data)
        except TimeoutError:
            found = await ledger.find(key)
            task, context = found if found is not None else ("", "")
            return RemoteOutcome(
                "unreachable", task, context, reason=f"no end within {deadline:g} s"
            )

    async def _delegate(
        self, agent: RemoteAgent, key: str, text: str, ledger: Ledger, data: Any
    ) -> RemoteOutcome:
        client, streams = await self._client(agent)
        found = await ledger.find(key)
        if found is None:
            message = pb.Message(
                message_id=message_id_for(key), role=pb.ROLE_USER, parts=[pb.Part(text=text)]
            )
            if data:
                message.metadata.update(data)
            request = pb.SendMessageRequest(
                message=message, configuration=pb.SendMessageConfiguration(return_immediately=True)
            )
            task = await self._first_task(client.send_message(request))
            await ledger.remember(key, task.id, task.context_id)
            end = outcome_of(task)
            if end is not None:
                return end
            found = (task.id, task.context_id)
        return await self._follow(client, streams, found[0])

    async def cancel(self, agent: RemoteAgent, task_id: str) -> None:
        """Ask ``agent`` to cancel ``task_id`` (a task that ended already stays as it is)."""
        client, _ = await self._client(agent)
        with contextlib.suppress(A2AError):  # not cancelable: it ended
            await client.cancel_task(pb.CancelTaskRequest(id=task_id))

    async def task_events(
        self, agent: RemoteAgent, task_id: str
    ) -> AsyncGenerator[pb.StreamResponse, None]:
        """``task_id``'s events from now on (``SubscribeToTask``): the task as it is, then its
        status and artifact updates until it ends. The SDK raises ``NotImplementedError`` for
        an agent whose card does not say it streams."""
        client, _ = await self._client(agent)
        async with contextlib.aclosing(
            client.subscribe(pb.SubscribeToTaskRequest(id=task_id))
        ) as events:
            async for event in events:
                yield event

    @staticmethod
    async def _first_task(stream: AsyncIterator[pb.StreamResponse]) -> pb.Task:
        try:
            async for event in stream:
                if event.HasField("task"):
                    return event.task
                if event.HasField("message"):
                    raise A2AClientError("the agent answered with a message, not a task")
        finally:
            with contextlib.suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]
        raise A2AClientError("the agent answered nothing")

    async def _follow(self, client: Any, streams: bool, task_id: str) -> RemoteOutcome:
        while True:
            try:
                task = await client.get_task(pb.GetTaskRequest(id=task_id))
            except TaskNotFoundError as exc:  # it made the task, and knows it no more
                reason = f"the remote agent lost its task {task_id} (TaskNotFoundError: {exc})"
                return RemoteOutcome("lost", task_id, "", reason=reason[:2000])
            except (A2AClientError, A2AError, httpx.HTTPError):
                await asyncio.sleep(self.poll)  # the remote is away: try again
                continue
            end = outcome_of(task)
            if end is not None:
                return end
            if streams:
                with contextlib.suppress(A2AClientError, A2AError, httpx.HTTPError):
                    stream = client.subscribe(pb.SubscribeToTaskRequest(id=task_id))
                    async for _ in stream:
                        pass  # the end is read from the task itself, below
                    continue
            await asyncio.sleep(self.poll)


async def _traced(request: httpx.Request) -> None:
    """The current trace context on ``request``; none when nothing is traced (a dictionary
    lookup when OpenTelemetry was never imported)."""
    for name, value in tracing.carrier().items():
        request.headers[name] = value


def encode_outcome(outcome: RemoteOutcome) -> str:
    """The outcome as the text a tool answers the model with."""
    return json.dumps(
        {"status": outcome.kind, "task": outcome.task_id, "result": outcome.result,
         "reason": outcome.reason or None},
        ensure_ascii=False, default=str,
    )  # fmt: skip
