"""Task-host fixtures: a real SQLite file (journal and task tables), the scripted provider."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from ankka.runtime.declare.agents import Service
from ankka.runtime.drivers.tasks.host import HostOptions, TaskHost
from ankka.runtime.drivers.tasks.iteration import RetryPolicy
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.records.tasks import TaskRecord, TaskSpec
from ankka.runtime.store.open import Store
from tests.support.runtimes import make_context, task_host_for

MakeHost = Callable[..., Awaitable[TaskHost]]
NO_PAUSE = RetryPolicy(first_pause=0.0, max_pause=0.0)
HOST_OPTIONS = frozenset(HostOptions.__dataclass_fields__)


@pytest.fixture
async def make_host(tmp_path: Path) -> AsyncIterator[MakeHost]:
    """Start task hosts on one SQLite file; each is stopped (and its store closed) at the end,
    or earlier with ``await stop(host)``."""
    async with AsyncExitStack() as stack:

        async def make(service: Service, provider: ModelProvider, **options: Any) -> TaskHost:
            """``options``: the task host's (:class:`HostOptions`) and the context's parts
            (``judges``, ``approvals``, ``clock``, ...)."""
            store = await Store.open(tmp_path / "store.sqlite3")
            stack.push_async_callback(store.close)
            host_options = {k: options.pop(k) for k in list(options) if k in HOST_OPTIONS}
            host_options.setdefault("retry", NO_PAUSE)
            host_options.setdefault("poll_seconds", 0.05)
            context = make_context(
                service,
                store=store.journal_store,
                providers={"default": provider},
                **options,
            )
            await stack.enter_async_context(context)
            host = task_host_for(context, store.tasks, **host_options)
            await stack.enter_async_context(host)
            return host

        yield make


async def put(
    host: TaskHost,
    task: str,
    instructions: str = "Summarise ankka.",
    *,
    agent: str = "researcher",
    kind: str = "summary",
    instance: str | None = None,
    depends_on: Sequence[str] = (),
) -> TaskRecord:
    record, _ = await host.put(
        agent,
        task,
        TaskSpec(agent, kind, instructions, depends_on=tuple(depends_on)),
        instance=instance,
        created_by="local",
    )
    return record


async def finished(host: TaskHost, task: str) -> TaskRecord:
    record = await host.wait(task, 10.0)
    assert record.final, f"task {task} did not end: {record}"
    return record
