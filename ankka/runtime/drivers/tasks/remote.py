"""Children another runtime works: created there over its task API, followed to their end.

A ``Delegate`` naming an agent a *peer* serves (another runtime: another Agent's pods, named
in ``ANKKA_PEERS``) makes a child whose tree row and ``PUT`` body are recorded here first
(:mod:`ankka.runtime.store.remote_statements`, in the transaction that reserves its grant);
then :class:`RemoteChildren`, in every process on the store, follows each child not settled:

1. ``PUT {peer}/v1/agents/{agent}/tasks/{child}`` with the recorded body (``parent``,
   ``lineage``, ``budget``), until the peer answers with the child; that it did is then
   recorded (:func:`~ankka.runtime.store.remote_statements.made`), and no process sends it
   again. Sent again only when a restart came between the answer and that record: the id
   is derived from the parent and the call, so it makes nothing new (the peer answers 200);
2. ``POST {peer}/v1/tasks/{child}/cancel`` once its parent ended or its deadline passed;
3. ``GET {peer}/v1/tasks/{child}?wait=S`` until the child is final; its end, its
   ``tree_iterations`` and ``tree_usage`` are settled in the tree in one transaction
   (:func:`~ankka.runtime.store.remote_statements.ended`), which tells the parent once and
   wakes it. Meanwhile the child's own events are relayed into the parent's notification
   stream, live only (:mod:`.remote_events`); its end is told after them.

A peer that is away (refused connections, 5xx, a broken wait, a 401 for the credential),
or this runtime's own certificate or token file unreadable for now (a rotation half-written),
is asked again, the pause doubling from 0.2 s to 5 s; a peer that refuses to make the child
(another 4xx to its first ``PUT``) ends it ``refused``, ``peer_refused``, with the peer's answer
as its reason. Once made (known from the store, so after a restart too), the child exists there
and may have spent: a 4xx about it is no refusal but a failure
(:func:`outcome_after_creation`): ``failed``, ``peer_lost`` for a
404 (the peer no longer knows it: its store was lost), else ``peer_error`` naming the status,
with what the peer last reported of its spend (``tree_iterations``, ``tree_usage`` of its answer
to the ``PUT`` or of the latest ``GET`` that found the child not final; each report is written
to the store as it is read, :func:`~ankka.runtime.store.remote_statements.reported`, so the last
one is counted after a restart too). The runtime
calls as itself: its ``--tls-dir`` certificate over mTLS (the peer's certificate must carry
the URI SAN its entry names), or a bearer token from a file, read again for each request.
A child of a remote A2A agent is followed over A2A instead (:mod:`.remote_a2a`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from ankka._kernel.errors import ConfigurationError, DependencyFailed, StoreError
from ankka.runtime.drivers.tasks.notify import Notifier
from ankka.runtime.drivers.tasks.peers import Peer, check_peers
from ankka.runtime.drivers.tasks.remote_a2a import A2AChildren
from ankka.runtime.drivers.tasks.remote_events import STREAM_SECONDS, guarded, relay_events
from ankka.runtime.providers.mtls import RotatingClientTLS
from ankka.runtime.providers.remote_agents import RemoteAgent
from ankka.runtime.records.delegation import ChildOutcome, End, outcome_of_end
from ankka.runtime.records.messages import Usage
from ankka.runtime.store import remote_statements as remote
from ankka.runtime.store import trace_statements
from ankka.runtime.store import tree_statements as tree
from ankka.runtime.store.remote_statements import Followed
from ankka.runtime.store.tasks import Ended, TaskStore

__all__ = ["PeerAnswered", "RemoteChildren", "outcome_after_creation"]

log = logging.getLogger("ankka.runtime.tasks")

WAIT_SECONDS = 10.0  # each GET ?wait= (a cancel owed meanwhile is sent after it)
DRAIN_SECONDS = 1.0  # how long a child's end waits for its events to be relayed
_FINAL = frozenset({"completed", "failed", "cancelled"})
_ENDS = frozenset(e.value for e in End)


class PeerAnswered(DependencyFailed):
    """The peer answered a request about the child with a 4xx (not 401, 408 or 429).

    ``peer_status`` is the peer's answer; ``status`` stays this error's own (502), should it
    ever reach a caller of ours."""

    kind = "peer_refused"

    def __init__(self, status: int, doing: str, said: str) -> None:
        super().__init__(f"the peer refused {doing} ({status}): {said}")
        self.peer_status, self.doing, self.said = status, doing, said


def outcome_after_creation(
    answered: PeerAnswered, *, task: str, agent: str, iterations: int
) -> ChildOutcome:
    """What the parent is told when the peer answers a 4xx about a child it made: the child
    exists (or existed) there and may have spent, so it failed; it was never refused."""
    spent = f"its spend there is counted as the peer last reported it ({iterations} iterations)"
    if answered.peer_status == 404:
        reason = (
            f"the peer lost the child it had made: it answered {answered.doing} with 404 "
            f"({answered.said}); {spent}"
        )
        return ChildOutcome("failed", task, agent, None, reason, "peer_lost")
    reason = (
        f"the peer answered {answered.doing} with {answered.peer_status} after making it "
        f"({answered.said}); {spent}"
    )
    return ChildOutcome("failed", task, agent, None, reason, "peer_error")


@dataclass
class _Client:
    http: httpx.AsyncClient
    generation: int


class RemoteChildren:
    """Follows every remote child on the store that is not settled (see the module)."""

    def __init__(
        self,
        store: TaskStore,
        peers: Mapping[str, Peer],
        *,
        told: Callable[[list[Ended]], None],
        nest: Callable[[str, Sequence[str]], None] | None = None,
        events: Notifier | None = None,
        a2a: Mapping[str, RemoteAgent] | None = None,
        tls_dir: str | None = None,
        poll_seconds: float = 1.0,
        wait_seconds: float = WAIT_SECONDS,
    ) -> None:
        self.store, self.peers, self.told, self.nest = store, dict(peers), told, nest
        self.events = events  # where a peer's child's own events are relayed (remote_events)
        self.poll_seconds, self.wait_seconds = poll_seconds, wait_seconds
        self._tls = {
            name: RotatingClientTLS(tls_dir, expected_uri=peer.identity)
            for name, peer in self.peers.items()
            if tls_dir is not None and peer.url.startswith("https://") and peer.identity
        }
        check_peers(self.peers, tls_dir)
        self.a2a = (
            A2AChildren(store, a2a, settle=self._drained, wait_seconds=wait_seconds)
            if a2a
            else None
        )
        self._clients: dict[str, _Client] = {}
        self._following: dict[str, asyncio.Task[None]] = {}
        self._relaying: dict[str, tuple[asyncio.Task[None], asyncio.Event]] = {}
        self._wake = asyncio.Event()

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.peers) | frozenset(self.a2a.agents if self.a2a else ())

    def wake(self) -> None:
        """A child was made here: look for it now."""
        self._wake.set()

    async def run(self) -> None:
        """Start following each child not followed yet, every poll (and when woken)."""
        try:
            while True:
                with contextlib.suppress(StoreError):
                    for child in await self.store.read(lambda tx: remote.following(tx, 200)):
                        self._start(child)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_seconds):
                        await self._wake.wait()
                self._wake.clear()
        finally:
            for task in [*self._following.values(), *(t for t, _ in self._relaying.values())]:
                task.cancel()
            for client in self._clients.values():
                await client.http.aclose()
            if self.a2a is not None:
                await self.a2a.aclose()

    def _start(self, child: Followed) -> None:
        if child.task in self._following:
            return
        if child.peer in self.peers:
            work = self._follow(child)
        elif self.a2a is not None and child.peer in self.a2a.agents:
            work = self.a2a.follow(child)
        else:
            return  # another process knows the peer (this one's settings do not name it)
        if self.nest is not None:
            # Its end reaches its ancestors' streams from whichever process follows it, also
            # one that did not make it (a restart, another process on the store).
            self.nest(child.task, child.ancestors)
        task = asyncio.create_task(work, name=f"ankka-remote-{child.task}")
        self._following[child.task] = task
        relaying = self._relay(child) if self.events is not None else None
        if relaying is not None:
            # Its own events, for as long as it is followed: beside the follow, never in its
            # way; a relay that fails is a warning, and the end is not held for it (guarded).
            done = asyncio.Event()
            guard = guarded(relaying, child=child.task, peer=child.peer, done=done)
            made = asyncio.create_task(guard, name=f"ankka-remote-events-{child.task}")
            self._relaying[child.task] = (made, done)
        task.add_done_callback(lambda _: self._followed(child.task))

    def _relay(self, child: Followed) -> Coroutine[Any, Any, None] | None:
        """The relay of ``child``'s own events: from its peer runtime's stream, or from its
        remote A2A agent's task updates."""
        assert self.events is not None
        if child.peer in self.peers:
            peer = self.peers[child.peer]
            stream = partial(self._stream, peer)
            return relay_events(self.events, child.task, peer.agent, stream)
        if self.a2a is not None and child.peer in self.a2a.agents:
            return self.a2a.relay(child, self.events)
        return None

    def _followed(self, task: str) -> None:
        self._following.pop(task, None)
        relaying = self._relaying.pop(task, None)
        if relaying is not None:
            relaying[0].cancel()

    async def _relayed(self, task: str) -> None:
        """The child is final at its peer: its events are handed on before its end is told
        (so a subscriber hears its end last), waiting for that at most :data:`DRAIN_SECONDS`
        (a relay whose stream is down relays nothing more; the end is not held for it)."""
        relaying = self._relaying.get(task)
        if relaying is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DRAIN_SECONDS):
                    await relaying[1].wait()

    async def _follow(self, child: Followed) -> None:
        failures, created = 0, child.created
        peer = self.peers[child.peer]
        # What the peer last reported of the child's spend, as the store keeps it: a child
        # the peer loses is counted with it, whichever process follows it after a restart.
        spent = child.spent
        while True:
            try:
                current = await self._current(child.task)
                if current is None:
                    return  # settled (by this process or another)
                created = created or current.created
                if current.created:
                    spent = current.spent  # every report is written once read (below)
                else:
                    # Made there once the peer answers: recorded, so that no process, after
                    # any restart, sends the PUT again or takes a 4xx about it as a refusal.
                    if not created:
                        spent = _spent(await self._put(peer, current))
                        created = True
                    await self.store.write(
                        partial(remote.made, task=child.task, iterations=spent[0], usage=spent[1])
                    )
                if current.outcome is not None and not current.cancel_sent:
                    await self._cancel(peer, current.task)
                    await self.store.write(lambda tx: tree.cancel_sent(tx, child.task))
                record = await self._get(peer, current.task)
                if record.get("state") in _FINAL:
                    told = _outcome(peer, record)
                    await self._relayed(current.task)
                    await self._settle(peer.agent, current.task, told, *_spent(record))
                    return
                if _spent(record) != spent:
                    spent = _spent(record)
                    await self.store.write(
                        partial(
                            remote.reported, task=child.task, iterations=spent[0], usage=spent[1]
                        )
                    )
                failures = 0
            except PeerAnswered as answered:
                if created:
                    why = outcome_after_creation(
                        answered, task=child.task, agent=peer.agent, iterations=spent[0]
                    )
                else:
                    why = ChildOutcome(
                        "refused", child.task, peer.agent, None, str(answered), "peer_refused"
                    )
                    spent = (0, Usage())
                await self._settle(peer.agent, child.task, why, *spent)
                return
            except (httpx.HTTPError, StoreError, _Away, ConfigurationError, OSError) as exc:
                failures += 1
                if failures in (1, 10) or failures % 100 == 0:
                    log.warning(
                        "remote child %s at %s: %s (asking again)", child.task, peer.url, exc
                    )
                await asyncio.sleep(min(5.0, 0.2 * 2 ** min(failures, 5)))

    async def _current(self, task: str) -> Followed | None:
        found = await self.store.read(lambda tx: remote.following(tx, 1, task=task))
        return found[0] if found else None

    async def _drained(
        self, peer: str, task: str, outcome: ChildOutcome, iterations: int, usage: Usage
    ) -> None:
        """An A2A child's end, settled once its events were handed on (:meth:`_relayed`)."""
        await self._relayed(task)
        await self._settle(peer, task, outcome, iterations, usage)

    async def _settle(
        self, peer: str, task: str, outcome: ChildOutcome, iterations: int, usage: Usage
    ) -> None:
        """``task`` ended at ``peer`` having spent ``iterations`` and ``usage``: settled once."""
        ended = await self.store.write(
            lambda tx: remote.ended(tx, task, outcome, iterations=iterations, usage=usage)
        )
        if ended:
            log.info("remote child %s (%s) ended %s", task, peer, outcome.status)
            self.told(ended)

    # -- the peer's API -----------------------------------------------------------------------

    def _client(self, peer: Peer) -> httpx.AsyncClient:
        rotating = self._tls.get(peer.agent)
        verify: Any = rotating.current() if rotating is not None else True
        generation = rotating.generation if rotating is not None else 0
        known = self._clients.get(peer.agent)
        if known is not None and known.generation == generation:
            return known.http
        made = httpx.AsyncClient(
            base_url=peer.url.rstrip("/"),
            verify=verify,
            timeout=httpx.Timeout(10.0, read=self.wait_seconds + 10.0),
        )
        if known is not None:
            asyncio.get_running_loop().create_task(known.http.aclose())
        self._clients[peer.agent] = _Client(made, generation)
        return made

    @staticmethod
    async def _headers(peer: Peer) -> dict[str, str]:
        """The bearer token, read from its file for every request (off the event loop): a
        mounted token (a projected service-account token) is rewritten before it expires."""
        if peer.token_file is None:
            return {}
        token = await asyncio.to_thread(Path(peer.token_file).read_text)
        return {"authorization": f"Bearer {token.strip()}"}

    async def _traced(self, peer: Peer, task: str) -> dict[str, str]:
        """The headers of a request about ``task``: the trace context recorded with it (the
        delegating call's span, when tracing is on), so the peer's span for the request is in
        this trace, and the credential (:meth:`_headers`)."""
        carrier = await self.store.read(lambda tx: trace_statements.get(tx, task))
        return {**carrier, **await self._headers(peer)}

    async def _put(self, peer: Peer, child: Followed) -> dict[str, Any]:
        """Create the child at the peer, in this trace (:meth:`_traced`): the peer's task is."""
        path = f"/v1/agents/{peer.agent}/tasks/{child.task}"
        headers = await self._traced(peer, child.task)
        answer = await self._client(peer).put(path, json=child.body, headers=headers)
        return _answer(answer, "creating it")

    async def _cancel(self, peer: Peer, task: str) -> None:
        """Ask the peer to cancel the child, in this trace (:meth:`_traced`)."""
        answer = await self._client(peer).post(
            f"/v1/tasks/{task}/cancel", headers=await self._traced(peer, task)
        )
        if answer.status_code != 409:  # already final there: nothing to cancel
            _answer(answer, "cancelling it")

    async def _stream(self, peer: Peer, task: str) -> httpx.Response:
        """The child's notification stream at the peer, opened (its body not read yet); in
        this trace, as the child's creation is (:meth:`_traced`)."""
        client = self._client(peer)
        request = client.build_request(
            "GET",
            f"/v1/tasks/{task}/notifications",
            params={"wait": f"{STREAM_SECONDS:g}"},
            headers=await self._traced(peer, task),
            timeout=httpx.Timeout(10.0, read=60.0),  # keep-alives come every 15 s
        )
        return await client.send(request, stream=True)

    async def _get(self, peer: Peer, task: str) -> dict[str, Any]:
        """The child's record at the peer, once final or after the wait; in this trace."""
        answer = await self._client(peer).get(
            f"/v1/tasks/{task}",
            params={"wait": f"{self.wait_seconds:g}"},
            headers=await self._traced(peer, task),
        )
        return _answer(answer, "reading it")


class _Away(Exception):
    """The peer answered 5xx, 408, 429 or 401 (or not JSON): it cannot answer now."""


def _answer(answer: httpx.Response, doing: str) -> dict[str, Any]:
    if answer.status_code >= 500 or answer.status_code in (408, 429):
        raise _Away(f"{doing}: the peer answered {answer.status_code}")
    if answer.status_code == 401:  # the credential, not the child: a token being rotated
        raise _Away(f"{doing}: the peer did not accept this runtime's credential (401)")
    try:
        data = answer.json()
    except ValueError:
        raise _Away(f"{doing}: the peer's answer ({answer.status_code}) is not JSON") from None
    if answer.status_code >= 400:
        message = (data.get("error") or {}).get("message") if isinstance(data, dict) else None
        raise PeerAnswered(answer.status_code, doing, str(message or data)[:500])
    if not isinstance(data, dict):
        raise _Away(f"{doing}: the peer's answer is not a JSON object")
    return data


def _spent(record: Mapping[str, Any]) -> tuple[int, Usage]:
    """What a child's record says its tree spent: its ``tree_iterations`` and ``tree_usage``."""
    usage = Usage.from_dict(dict(record.get("tree_usage") or {}))
    return int(record.get("tree_iterations") or 0), usage


def _outcome(peer: Peer, record: Mapping[str, Any]) -> ChildOutcome:
    end = str(record.get("end") or record.get("state"))
    kind = End(end) if end in _ENDS else End.FAILED
    return outcome_of_end(
        kind,
        task=str(record.get("id")),
        agent=peer.agent,
        result=record.get("result"),
        reason=record.get("reason"),
    )
