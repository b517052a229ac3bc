"""The task host: runs a service's autonomous agents' instances, and answers for their tasks.

One scheduler and one worker per instance with work, all owned by the host's task group
(``async with TaskHost(...)``). The scheduler finds every active instance with unfinished
tasks in the store, takes its lease, and starts its worker; a worker works the instance's
tasks one at a time (:func:`.iteration.work_task`) and leaves memory when none is ready. So a
restarted runtime resumes every instance that had work without a request to it.

On PostgreSQL several processes share the work: each instance is owned through a lease that
its owner renews every third of ``lease_seconds``; a process that dies stops renewing, and
once the lease has run out another process claims the instance and carries on from its
records. On SQLite one process owns the file, and its leases are its own across restarts.
A process runs at most ``max_instances`` instances at once; the rest wait for a free place
here or are taken by another process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ankka._kernel import tracing
from ankka._kernel.errors import NotFound, RequestError, StoreError
from ankka.runtime.declare.autonomous import AutonomousAgent
from ankka.runtime.drivers.context import Context
from ankka.runtime.drivers.elicitations import ElicitationDesk
from ankka.runtime.drivers.tasks.iteration import (
    LeaseLost,
    RetryPolicy,
    Waiting,
    Workbench,
    heard_ended,
    told,
    work_task,
)
from ankka.runtime.drivers.tasks.notify import DEFAULT_BUFFER, TASK_ENDS, Notice, Notifier
from ankka.runtime.drivers.tasks.peers import Peer
from ankka.runtime.providers.remote_agents import RemoteAgent
from ankka.runtime.records.tasks import (
    TEAM_TASK_PREFIX,
    InstanceRecord,
    InstanceState,
    TaskRecord,
    TaskSpec,
    TaskState,
    check_id,
    check_instance_name,
)
from ankka.runtime.store import delegate_statements, trace_statements
from ankka.runtime.store import task_statements as statements
from ankka.runtime.store import tree_statements as tree
from ankka.runtime.store.readable import EVERYONE, Cursor, Readers
from ankka.runtime.store.tasks import Ended, Picked, TaskStore, Transaction

if TYPE_CHECKING:
    from ankka.runtime.drivers.tasks.remote import RemoteChildren

__all__ = ["HostOptions", "InstanceView", "TaskHost"]

log = logging.getLogger("ankka.runtime.tasks")

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class InstanceView:
    record: InstanceRecord
    current: str | None
    queue: tuple[TaskRecord, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class HostOptions:
    """How a task host schedules: its lease owner's name (default: host, pid and a nonce on a
    shared store, ``local`` on SQLite), the lease length (PostgreSQL), how often it looks for
    work and looks again at idle instances, when a waiting task is pending too long, how
    many instances it runs at once, each subscriber's buffer, and how failed attempts pause."""

    owner: str | None = None
    lease_seconds: float = 10.0
    poll_seconds: float = 0.5
    idle_recheck_seconds: float = 5.0
    pending_too_long: float = 300.0
    max_instances: int = 100
    notification_buffer: int = DEFAULT_BUFFER
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    # Delegation across runtimes (docs/delegation.md): the agents other runtimes serve, the
    # folder of this runtime's own certificate (its identity when it calls them), and who may
    # create a task here as another runtime's child (ANKKA_DELEGATORS).
    peers: Mapping[str, Peer] = field(default_factory=dict)
    # Remote A2A agents (ANKKA_A2A_REMOTE_<NAME>_*), by their name as the variables spell it.
    a2a_agents: Mapping[str, RemoteAgent] = field(default_factory=dict)
    peer_tls_dir: str | None = None
    delegators: frozenset[str] = frozenset()


class TaskHost:
    def __init__(
        self,
        context: Context,
        *,
        store: TaskStore,
        options: HostOptions | None = None,
        questions: ElicitationDesk | None = None,
    ) -> None:
        """``questions``: where the tasks' MCP servers' questions wait for a person (the
        request runtime's desk, so one API answers both)."""
        options = options or HostOptions()
        self.context = context
        self.service = context.service
        self.store = store
        self.clock = context.clock
        # Other processes' notices reach this one's subscribers through the store's relay,
        # and their task ends close the questions those tasks' calls wait on here.
        self.notifier = Notifier(
            self.clock,
            buffer=options.notification_buffer,
            relay=store.notices(),
            heard=context.metrics.work.heard,
            ended_elsewhere=partial(heard_ended, questions) if questions is not None else None,
            resynced=self._resynced if questions is not None else None,
        )
        self.bench = Workbench(
            context,
            store,
            self.notifier,
            options.sleep,
            options.retry,
            poke=self._work_made,
            made=self._children_made,
            places=self._places,
            woken=self._woken,
            questions=questions,
        )
        self.delegators = options.delegators
        a2a = _delegated_a2a(self.service.autonomous_agents.values(), options.a2a_agents)
        self.remote: RemoteChildren | None = None
        if options.peers or a2a:
            # Imported only here: the follower brings httpx, the a2a-sdk's client and
            # cryptography, which a runtime with no peer never needs (nor imports at start).
            from ankka.runtime.drivers.tasks.remote import RemoteChildren

            self.remote = RemoteChildren(
                store,
                options.peers,
                told=partial(told, self.bench),
                nest=self.notifier.nest,
                events=self.notifier,
                a2a=a2a,
                tls_dir=options.peer_tls_dir,
            )
        if self.remote is not None:
            self.bench = replace(self.bench, remotes=self.remote.names)
        owner = options.owner
        lease_seconds = options.lease_seconds
        poll_seconds = options.poll_seconds
        idle_recheck_seconds = options.idle_recheck_seconds
        pending_too_long = options.pending_too_long
        max_instances = options.max_instances
        shared_owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.owner = owner or (shared_owner if store.shared else "local")
        # On a shared store its workers' commits hold their instances' leases as this owner
        # (iteration.py); SQLite's file is one process's, its leases its own.
        self.bench = replace(self.bench, claimant=self.owner, lease_seconds=lease_seconds)
        if store.shared:
            self.bench = replace(self.bench, owner=self.owner)
        self.lease_seconds = lease_seconds
        # An instance's lease is given up when its worker stops, for another owner to take;
        # on SQLite as "local" the file and every lease in it are this process's (and its
        # successor's, after a restart), so there is no one to give it to.
        self._leases_shared = store.shared or self.owner != "local"
        self.poll_seconds = poll_seconds
        self.idle_recheck_seconds = idle_recheck_seconds
        self.pending_too_long = pending_too_long
        self.max_instances = max_instances
        self._workers: dict[Key, asyncio.Task[None]] = {}
        self._claiming: set[Key] = set()  # workers whose claim is not yet committed
        self._releasing: set[Key] = set()  # children's instances claimed, being given up
        self._stopping: set[Key] = set()  # workers past their work, giving their lease up
        # Instances with nothing to do for now: at a mark (waiting on children: taken up
        # again when the mark moves), or None (waiting for a decision: until a poke or the
        # idle recheck).
        self._idle: dict[Key, int | None] = {}
        self._wake = asyncio.Event()
        self._group: asyncio.TaskGroup | None = None
        self._last_renewal = float("-inf")
        self._last_idle_reset = float("-inf")
        # The relay came back after a break: the scheduler reads whether the tasks of the
        # questions waiting here ended meanwhile (their end notices may have been missed).
        self._recheck_questions = False
        # Instances this host must leave alone: a team's member instances of other processes
        # (docs/teams.md), which end with their claims rather than being taken over.
        self.reserved: Callable[[Key], bool] = _none_reserved

    # -- lifetime ---------------------------------------------------------------------------

    async def __aenter__(self) -> TaskHost:
        if self.bench.questions is not None:
            # A task another process ends may be one whose call waits on a question here:
            # its end is heard from now on, not only once someone subscribes.
            self.notifier.listen()
        group = asyncio.TaskGroup()
        await group.__aenter__()
        self._group = group
        self._scheduler = group.create_task(self._schedule(), name="ankka-task-scheduler")
        if self.remote is not None:
            self._follower = group.create_task(self.remote.run(), name="ankka-remote-children")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._group is None:
            return
        self._scheduler.cancel()
        if self.remote is not None:
            self._follower.cancel()
        for worker in list(self._workers.values()):
            worker.cancel()
        await self._group.__aexit__(None, None, None)
        self._group = None

    def poke(self) -> None:
        """Look for work now rather than at the next poll (an instance waiting on children is
        taken up when its mark moves, not by every poke)."""
        self._unidle()
        self._wake.set()

    def _unidle(self) -> None:
        self._idle = {key: mark for key, mark in self._idle.items() if mark is not None}

    def _work_made(self) -> None:
        """A task was made here (a task handed on): look for it now, waking no idle
        instance."""
        self._wake.set()
        if self.remote is not None:
            self.remote.wake()

    def _places(self) -> int:
        return max(0, self.max_instances - len(self._workers))

    def _children_made(self, keys: Sequence[Key], more: bool) -> None:
        """Children were made here, the instances ``keys`` claimed as this host in the same
        transaction (as many as it had places for): start them now, rather than at the
        scheduler's next look, which is now when ``more`` were made. One this host has no
        place for after all is left to its scheduler or, on a shared store, released for
        another process to take."""
        if self.remote is not None:
            self.remote.wake()
        if more:
            self._wake.set()
        left = [key for key in keys if not self._start(key, claimed=True)]
        if left and self.store.shared and self._group is not None:
            self._releasing.update(left)  # not started here until given up
            self._group.create_task(self._release(left), name="ankka-release-children")

    def _start(self, key: Key, *, claimed: bool = False) -> bool:
        """Start a worker for the instance ``key`` unless one runs (``claimed``: its lease is
        this host's already; else the worker claims it first, and ends at once when another
        process holds it): False when this host leaves it (idle, not its agent's, reserved, or
        no place free)."""
        if key in self._workers:
            return True
        if (
            self._group is None
            or key in self._releasing
            or key in self._idle
            or key[0] not in self.agents
            or self.reserved(key)
            or len(self._workers) >= self.max_instances
        ):
            return False
        if not claimed:
            self._claiming.add(key)
        work = self._run_instance(key) if claimed else self._claim_and_run(key)
        self._workers[key] = self._group.create_task(work, name=f"ankka-instance-{key[0]}/{key[1]}")
        return True

    async def _release(self, keys: Sequence[Key]) -> None:
        """Give up the leases of instances this host claimed and does not run (yet)."""

        def release(tx: Transaction) -> None:
            for key in keys:
                statements.release(tx, *key, self.owner)

        try:
            with contextlib.suppress(StoreError):
                await self.store.write(release)
        finally:
            self._releasing.difference_update(keys)
            self._wake.set()

    def _resynced(self) -> None:
        """Other processes' notices may have been missed: read the questions' tasks again."""
        self._recheck_questions = True
        self._wake.set()

    async def _ended_meanwhile(self) -> None:
        """Close the questions waiting here whose tasks ended through another process while
        its end notice could not arrive, as the notice would have (:func:`heard_ended`)."""
        questions = self.bench.questions
        self._recheck_questions = False
        if questions is None:
            return
        asking = questions.asking_tasks()
        if not asking:
            return
        try:
            records = await self.store.read(lambda tx: [statements.get(tx, t) for t in asking])
        except StoreError:
            self._recheck_questions = True  # the next tick tries again
            raise
        for record in records:
            if record is not None and record.final:
                questions.end_task(record.id, record.state.value, record.reason)

    def _woken(self, keys: Sequence[Key]) -> None:
        """These instances have something new (a child of theirs ended): take them up now."""
        for key in keys:
            self._idle.pop(key, None)
        self._wake.set()

    @property
    def agents(self) -> dict[str, AutonomousAgent]:
        return self.service.autonomous_agents

    # -- scheduling -------------------------------------------------------------------------

    async def _schedule(self) -> None:
        while True:
            try:
                await self._tick()
            except StoreError as exc:
                log.warning("the task scheduler could not read the store: %s", exc)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.poll_seconds):
                    await self._wake.wait()
            self._wake.clear()

    async def _tick(self) -> None:
        if self._recheck_questions:
            await self._ended_meanwhile()
        now = self.clock.now().timestamp()
        if self.store.shared and now - self._last_renewal >= self.lease_seconds / 3:
            until = now + self.lease_seconds
            # Only the workers whose claim was committed before the renewal are its to
            # check (a worker still claiming is not yet in what the renewal finds).
            # Nor are those stopping (giving their lease up, or their task's end having
            # ended its instance and cleared its lease): they make no model call.
            held = {
                k: w
                for k, w in self._workers.items()
                if k not in self._claiming and k not in self._stopping
            }
            mine = set(await self.store.write(lambda tx: statements.renew(tx, self.owner, until)))
            self._last_renewal = now
            for key, worker in held.items():
                if key not in mine and self._workers.get(key) is worker:
                    log.warning("lost the lease of instance %s/%s; stopping it", *key)
                    worker.cancel()
        if now - self._last_idle_reset >= self.idle_recheck_seconds:
            self._idle.clear()
            self._last_idle_reset = now
        await self._expire(now)
        work = await self.store.read(statements.with_work_marks)
        for key, mark in work:
            if len(self._workers) >= self.max_instances:
                break  # the rest is left to other processes, or to a later tick
            if key in self._idle and self._idle[key] not in (None, mark):
                del self._idle[key]  # waiting on a child, and something changed since
            if key in self._workers or key in self._idle or key[0] not in self.agents:
                continue
            self._start(key)

    async def _expire(self, now: float) -> None:
        """End the children past their deadline (any process may: it is one transaction, and
        a child ended twice is ended once)."""
        if not await self.store.read(lambda tx: tree.due(tx, now, 1)):
            return
        stamp = self.clock.now()
        ended = await self.store.write(lambda tx: delegate_statements.expire(tx, now=stamp))
        told(self.bench, ended)

    async def _claim_and_run(self, key: Key) -> None:
        """Claim the instance's lease (free, run out, or this host's already), then work it;
        left to its holder (another process) when the claim fails."""
        now, claimed = self.clock.now().timestamp(), False
        try:
            claimed = await self.store.write(
                partial(
                    statements.claim,
                    agent=key[0],
                    instance=key[1],
                    owner=self.owner,
                    until=now + self.lease_seconds,
                    now=now,
                )
            )
        except StoreError as exc:
            log.warning("could not claim instance %s/%s: %s", *key, exc)
            claimed = False
        finally:
            self._claiming.discard(key)
            if not claimed:
                self._workers.pop(key, None)
        if claimed:
            await self._run_instance(key)

    async def _run_instance(self, key: Key) -> None:
        agent_name, instance = key
        agent = self.agents[agent_name]
        self.notifier.publish("activated", agent=agent_name, instance=instance)
        try:
            await self._work_instance(agent, instance)
        except asyncio.CancelledError:
            raise
        except (LeaseLost, StoreError) as exc:
            log.warning("instance %s/%s stopped: %s", agent_name, instance, exc)
        except Exception:
            log.exception("instance %s/%s failed unexpectedly", agent_name, instance)
        finally:
            # The lease is given up before the instance may be started again here: a worker
            # started meanwhile would claim it and then lose it to this release.
            self._stopping.add(key)
            try:
                self.notifier.publish("passivated", agent=agent_name, instance=instance)
                if self._leases_shared:
                    with contextlib.suppress(StoreError):
                        await self.store.write(
                            lambda tx: statements.release(tx, agent_name, instance, self.owner)
                        )
            finally:
                self._stopping.discard(key)
                self._workers.pop(key, None)
                self._wake.set()

    async def _work_instance(self, agent: AutonomousAgent, instance: str) -> None:
        while True:
            holder, picked = await self.store.read(
                partial(_holder_and_pick, key=(agent.name, instance))
            )
            if holder is None or holder.state != InstanceState.ACTIVE:
                return
            self._tell_waiting(agent.name, instance, picked.waiting)
            if picked.task is None:
                if picked.waiting:
                    self._idle[(agent.name, instance)] = None
                return
            task = picked.task
            waiting: Waiting | None = None
            try:
                async with self._traced(task.id):
                    waiting = await work_task(self.bench, agent, task)
            except (asyncio.CancelledError, LeaseLost, StoreError):
                raise
            except Exception as exc:
                # A fault of the platform, not of the task's decisions: end the task saying
                # so, rather than retrying it for ever.
                log.exception("working task %s failed unexpectedly", task.id)
                reason = f"the runtime failed working the task: {type(exc).__name__}: {exc}"
                await self._finish(task.id, TaskState.FAILED, reason)
            if waiting is not None:
                self._idle[(agent.name, instance)] = waiting.mark
                return
            if await self._still_awaiting(task.id):
                self._idle[(agent.name, instance)] = None
                return
            self._unidle()

    @contextlib.asynccontextmanager
    async def _traced(self, task: str) -> AsyncIterator[None]:
        """With tracing on, the task's recorded trace context is current while it is worked,
        so every iteration, in this process or the next after a crash, is in its trace (one
        read per task worked, not per iteration)."""
        spans = self.context.spans
        if spans is None:
            yield
            return
        carrier = await self.store.read(lambda tx: trace_statements.get(tx, task))
        with spans.under(carrier):
            yield

    async def _still_awaiting(self, task: str) -> bool:
        """The task waits for approval: its instance idles until a decision pokes the host
        (or the idle recheck, after a restart)."""
        record: TaskRecord | None = await self.store.read(lambda tx: statements.get(tx, task))
        return record is not None and record.state == TaskState.AWAITING_APPROVAL

    def approval_decided(self, task: str, data: dict[str, Any], last: bool) -> None:
        """A request of ``task`` was decided (by a person or the platform); after the last,
        its instance settles the calls before anything else."""
        self.notifier.publish(
            "approval_decided",
            agent=str(data.get("agent", "")),
            instance=data.get("instance"),
            task=task,
            **{k: v for k, v in data.items() if k not in ("agent", "instance")},
        )
        if last:
            self.poke()

    def _tell_waiting(self, agent: str, instance: str, waiting: Sequence[TaskRecord]) -> None:
        now = self.clock.now()
        for task in waiting:
            if self.notifier.once(task.id, "task_waiting"):
                self.notifier.publish(
                    "task_waiting",
                    agent=agent,
                    instance=instance,
                    task=task.id,
                    depends_on=list(task.spec.depends_on),
                )
            created = task.created_at or now
            if (now - created).total_seconds() > self.pending_too_long and self.notifier.once(
                task.id, "dependency_pending_long"
            ):
                self.notifier.publish(
                    "dependency_pending_long",
                    agent=agent,
                    instance=instance,
                    task=task.id,
                    waited_seconds=round((now - created).total_seconds()),
                )

    async def _finish(self, task: str, state: TaskState, reason: str) -> None:
        ended = await self.store.write(
            lambda tx: statements.finish(tx, task, state, reason=reason, now=self.clock.now())
        )
        told(self.bench, ended)

    # -- what the HTTP API asks -------------------------------------------------------------

    async def put(
        self,
        agent: str,
        task: str,
        spec: TaskSpec,
        *,
        instance: str | None,
        created_by: str,
    ) -> tuple[TaskRecord, bool]:
        declared = self.agents.get(agent)
        if declared is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise NotFound(f"there is no autonomous agent {agent!r} (autonomous agents: {known})")
        accepts = declared.accepted(spec.type)
        if accepts is None:
            types = ", ".join(a.task_type.name for a in declared.accepts)
            raise RequestError(
                f"agent {agent!r} does not accept task type {spec.type!r} (it accepts: {types})"
            )
        check_id(task, "task")
        if task.startswith(TEAM_TASK_PREFIX):
            raise RequestError(
                f"task id {task!r} is not one a caller may give: ids '{TEAM_TASK_PREFIX}...' "
                "are the tasks of teams' backlog items (docs/teams.md)"
            )
        if instance is not None:
            check_instance_name(instance)
        for dependency in spec.depends_on:
            check_id(dependency, "dependency")
        policy = self.context.policy

        def may_read(creator: str, of: str) -> bool:
            return policy.allows(created_by, "read", creator=creator, agent=of)

        iterations, tokens = _budget_of(accepts.budget, accepts.tokens, spec)
        # The context current now (the PUT's or the A2A request's span) is the task's trace.
        carrier = tracing.carrier() if self.context.spans is not None else {}

        def write(tx: Transaction) -> tuple[TaskRecord, bool, list[Ended]]:
            done = statements.put(
                tx,
                task,
                spec,
                instance=instance,
                budget=iterations,
                tokens=tokens,
                created_by=created_by,
                may_read=may_read,
                now=self.clock.now(),
            )
            if done[1] and carrier:
                trace_statements.record(tx, task, carrier)
            return done

        record, created, ended = await self.store.write(write)
        if record.state == TaskState.ASSIGNED and (created or instance is not None):
            self.notifier.publish(
                "task_assigned", agent=agent, instance=record.instance, task=record.id
            )
        told(self.bench, ended)
        self.poke()
        return record, created

    async def get(self, task: str) -> TaskRecord:
        """The task's record, with its place in its tree."""

        def read(tx: Any) -> TaskRecord | None:
            found = statements.get(tx, task)
            return replace(found, tree=tree.view(tx, found)) if found is not None else None

        record: TaskRecord | None = await self.store.read(read)
        if record is None:
            raise NotFound(f"there is no task {task!r}")
        return record

    async def recent(
        self,
        limit: int,
        *,
        who: Readers = EVERYONE,
        after: Cursor | None = None,
        matching: Mapping[str, str] | None = None,
    ) -> list[TaskRecord]:
        """The tasks ``who`` may read whose ``state``/``agent``/``type`` are ``matching``,
        newest first: ``limit`` older than the cursor ``after``."""

        def work(tx: Transaction) -> list[TaskRecord]:
            return statements.recent(tx, limit, who=who, after=after, matching=matching)

        records: list[TaskRecord] = await self.store.read(work)
        return records

    async def wait(self, task: str, seconds: float) -> TaskRecord:
        """The task's record once it is final, or as it stands after ``seconds``."""
        deadline = self.clock.monotonic() + seconds
        with self.notifier.subscribe(("task", task)) as subscription:
            while True:
                record = await self.get(task)
                left = deadline - self.clock.monotonic()
                if record.final or left <= 0:
                    return record
                # Woken early by this process's own notification of the task's end (and
                # read again after notifications were lost), the rest passed over (its
                # descendants', its progress); polled for other processes'.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(left, 0.25)):
                        while True:
                            heard = await subscription.next()
                            if not isinstance(heard, Notice) or (
                                heard.task == task and heard.event in TASK_ENDS
                            ):
                                break

    async def cancel(self, task: str) -> TaskRecord:
        record, ended = await self.store.write(
            lambda tx: statements.cancel(tx, task, self.clock.now())
        )
        told(self.bench, ended)
        self.poke()
        return await self.get(record.id)

    async def set_instance(self, agent: str, instance: str, state: InstanceState) -> InstanceView:
        if agent not in self.agents:
            raise NotFound(f"there is no autonomous agent {agent!r}")
        await self.store.write(
            lambda tx: statements.set_instance(tx, agent, instance, state, self.clock.now())
        )
        if state == InstanceState.TERMINATED:
            worker = self._workers.get((agent, instance))
            if worker is not None:
                worker.cancel()
        self.poke()
        return await self.instance(agent, instance)

    async def instance(self, agent: str, instance: str) -> InstanceView:
        def read(tx: Any) -> tuple[InstanceRecord | None, Picked, list[TaskRecord]]:
            return (
                statements.get_instance(tx, agent, instance),
                statements.pick(tx, agent, instance),
                statements.queue(tx, agent, instance),
            )

        record, picked, queue = await self.store.read(read)
        if record is None:
            raise NotFound(f"agent {agent!r} has no instance {instance!r}")
        current = next(
            (
                t.id
                for t in queue
                if t.state.value in ("in-progress", "result-rejected", "awaiting-approval")
            ),
            None,
        )
        if current is None and picked.task is not None and picked.task.started:
            current = picked.task.id
        return InstanceView(record, current, tuple(queue))


def _delegated_a2a(
    agents: Iterable[AutonomousAgent], remote: Mapping[str, RemoteAgent]
) -> dict[str, RemoteAgent]:
    """The remote A2A agents the service's agents delegate to, by the name their ``Delegate``
    gives (``ANKKA_A2A_REMOTE_<NAME>_*`` spells it upper case, ``-`` as ``_``)."""
    found: dict[str, RemoteAgent] = {}
    for agent in agents:
        for item in agent.delegates:
            known = remote.get(item.agent.lower().replace("-", "_"))
            if known is not None:
                found[item.agent] = known
    return found


def _holder_and_pick(tx: Transaction, key: Key) -> tuple[InstanceRecord | None, Picked]:
    """The instance's record and the task its worker is to work next (one read)."""
    return statements.get_instance(tx, *key), statements.pick(tx, *key)


def _none_reserved(key: Key) -> bool:
    return False


def _budget_of(iterations: int, tokens: int | None, spec: TaskSpec) -> tuple[int, int | None]:
    """A task's budget: its type's, lowered to what its creator gave it (never raised)."""
    given = spec.budget
    if given is None:
        return iterations, tokens
    if given.iterations is not None:
        iterations = min(iterations, given.iterations)
    if given.tokens is not None:
        tokens = given.tokens if tokens is None else min(tokens, given.tokens)
    return iterations, tokens
