"""Children delegated to an agent of another platform, over A2A (docs/a2a.md, the client).

A ``Delegate`` naming a remote A2A agent (an Agent's ``spec.remoteAgents``, rendered as
``ANKKA_A2A_REMOTE_<NAME>_CARD_URL``) makes a remote child like one for a peer runtime
(:mod:`.remote`): its tree row and body are recorded first. :class:`A2AChildren` then sends the
child's instructions as one message, its ``messageId`` derived from the child's id, with
``metadata.taskType`` its type, and follows the A2A task to its end
(:class:`~ankka.runtime.providers.a2a_remote.RemoteAgents`). Which A2A task the message made
is written to the store (``ankka_remote_a2a``) as soon as the agent answers, so a restart
follows it without sending again; only a restart between the send and that write sends
again, with the same ``messageId`` (an agent that dedupes by it answers with the same task).

What it spent is not known over A2A: the child's grant goes back to its parent whole, and
its ``tree_usage`` adds nothing. Its end: ``completed`` (the artifact's text or data as the
result), ``cancelled`` (``canceled``), else ``failed`` naming what the agent said
(``failed``, ``rejected``, ``input_required``, ``auth_required``); a task the agent made and
then answers ``TaskNotFoundError`` for (its store lost) is ``failed``, ``peer_lost``.
Meanwhile its own A2A updates are relayed into its parent's stream, live only
(:meth:`A2AChildren.relay`, :mod:`.remote_a2a_events`); its end is told after them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from functools import partial
from typing import Any

import httpx
from a2a.client.errors import A2AClientError
from a2a.utils.errors import A2AError

from ankka._kernel import tracing
from ankka._kernel.errors import StoreError
from ankka.runtime.drivers.tasks.notify import Notifier
from ankka.runtime.drivers.tasks.remote_a2a_events import relay_a2a_events
from ankka.runtime.providers.a2a_remote import RemoteAgents, RemoteOutcome
from ankka.runtime.providers.remote_agents import RemoteAgent
from ankka.runtime.records.delegation import ChildOutcome, End, outcome_of_end
from ankka.runtime.records.messages import Usage
from ankka.runtime.store import remote_statements as remote
from ankka.runtime.store import trace_statements
from ankka.runtime.store import tree_statements as tree
from ankka.runtime.store.remote_statements import Followed
from ankka.runtime.store.tasks import TaskStore

__all__ = ["A2AChildren", "described", "outcome_of_remote"]

log = logging.getLogger("ankka.runtime.tasks")

Settle = Callable[[str, str, ChildOutcome, int, Usage], Awaitable[None]]


class _Ledger:
    """The A2A client's ledger, in the task store."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store

    async def find(self, key: str) -> tuple[str, str] | None:
        return await self.store.read(lambda tx: remote.a2a_task(tx, key))

    async def remember(self, key: str, task_id: str, context_id: str) -> None:
        await self.store.write(lambda tx: remote.remember_a2a(tx, key, task_id, context_id))


def outcome_of_remote(outcome: RemoteOutcome, *, task: str, agent: str) -> ChildOutcome:
    """The parent's view of a remote A2A task's end."""
    if outcome.kind == "completed":
        return outcome_of_end(End.COMPLETED, task=task, agent=agent, result=outcome.result)
    if outcome.kind == "lost":  # made there, then lost: a failure, never a refusal
        return ChildOutcome("failed", task, agent, None, outcome.reason, "peer_lost")
    if outcome.kind == "canceled":
        reason = outcome.reason or "the remote agent cancelled it"
        return outcome_of_end(End.CANCELLED, task=task, agent=agent, reason=reason)
    reason = f"the remote agent's task {outcome.task_id} ended {outcome.kind}"
    if outcome.reason:
        reason += f": {outcome.reason}"
    return outcome_of_end(End.FAILED, task=task, agent=agent, reason=reason)


class A2AChildren:
    """Follows the children delegated to remote A2A agents (see the module)."""

    def __init__(
        self,
        store: TaskStore,
        agents: Mapping[str, RemoteAgent],
        *,
        settle: Settle,
        wait_seconds: float = 10.0,
    ) -> None:
        self.store, self.agents, self.settle = store, dict(agents), settle
        self.wait_seconds = wait_seconds
        self.ledger = _Ledger(store)
        self.client = RemoteAgents(poll_seconds=0.5)

    async def aclose(self) -> None:
        await self.client.__aexit__(None, None, None)

    async def follow(self, child: Followed) -> None:
        agent, failures = self.agents[child.peer], 0
        text = "\n\n".join([child.body["instructions"], *child.body.get("attachments", ())])
        # The context recorded with the child (its delegating call's span, tracing on): every
        # request to the remote agent carries it, so its work joins the delegating trace.
        recorded = await self.store.read(lambda tx: trace_statements.get(tx, child.task))
        while True:
            try:
                current = await self.store.read(lambda tx: remote.following(tx, 1, task=child.task))
                if not current:
                    return
                if await self._cancel_owed(agent, current[0]):
                    # Ended before its message was sent: nothing is sent, nothing was spent.
                    assert current[0].outcome is not None
                    await self.settle(child.peer, child.task, current[0].outcome, 0, Usage())
                    return
                with tracing.continued(recorded):
                    outcome = await self.client.delegate(
                        agent,
                        key=child.task,
                        text=text,
                        ledger=self.ledger,
                        deadline=self.wait_seconds,
                        data={"taskType": child.body["type"], "parent": child.body["parent"]},
                    )
                if outcome.kind != "unreachable":  # no end within this wait: look again
                    told = outcome_of_remote(outcome, task=child.task, agent=child.peer)
                    await self.settle(child.peer, child.task, told, 0, Usage())
                    return
                failures = 0
            except (httpx.HTTPError, A2AClientError, A2AError, StoreError, OSError) as exc:
                failures += 1
                if failures in (1, 10) or failures % 100 == 0:
                    log.warning("remote A2A child %s at %s: %s (asking again)", child.task,
                                agent.card_url, described(exc))  # fmt: skip
                await asyncio.sleep(min(5.0, 0.2 * 2 ** min(failures, 5)))

    def relay(self, child: Followed, notifier: Notifier) -> Coroutine[Any, Any, None]:
        """The relay of ``child``'s own A2A updates into its parent's stream, to run beside
        :meth:`follow` (:mod:`.remote_a2a_events`); its requests carry the child's recorded
        trace context too, as the follow's do."""

        async def find(task: str) -> str | None:
            found = await self.ledger.find(task)
            return found[0] if found is not None else None

        async def relaying() -> None:
            recorded: dict[str, str] = {}
            with contextlib.suppress(StoreError):  # untraced, rather than not relayed
                recorded = await self.store.read(lambda tx: trace_statements.get(tx, child.task))
            subscribe = partial(self.client.task_events, self.agents[child.peer])
            with tracing.continued(recorded):
                await relay_a2a_events(
                    notifier, child.task, child.peer, find=find, subscribe=subscribe
                )

        return relaying()

    async def _cancel_owed(self, agent: RemoteAgent, child: Followed) -> bool:
        """Its parent ended, or its deadline passed: cancel the A2A task (once). Whether no
        message was ever sent for it (then there is nothing to follow)."""
        if child.outcome is None:
            return False
        found = await self.ledger.find(child.task)
        if found is not None and not child.cancel_sent:
            await self.client.cancel(agent, found[0])
            await self.store.write(lambda tx: tree.cancel_sent(tx, child.task))
        return found is None


def described(exc: BaseException) -> str:
    """What a failed look at a remote child logs: the store's, the network's and httpx's own
    words, but an A2A error by its type (and HTTP status) only: its message is the peer's
    text, which can echo what a request carried (a header's value)."""
    if isinstance(exc, A2AError):
        status = getattr(exc, "status_code", None)
        return type(exc).__name__ + (f" (HTTP {status})" if isinstance(status, int) else "")
    return str(exc) or type(exc).__name__
