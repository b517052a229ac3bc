"""The runtime's unit fixtures, on a real SQLite file with the scripted provider: a runtime
(``make_runtime``) and task hosts (``make_host``, with ``put`` and ``finished``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Protocol

import pytest

from ankka.runtime.declare.agents import Service
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.drivers.tasks.host import HostOptions, TaskHost
from ankka.runtime.drivers.tasks.iteration import RetryPolicy
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.tasks import TaskRecord, TaskSpec
from ankka.runtime.store.open import Store
from tests.support.runtimes import make_context, runtime_for, task_host_for
from tests.support.stores import journal_store

Script = Sequence[dict[str, Any] | str]


class MakeRuntime(Protocol):
    """The ``make_runtime`` fixture: a runtime for ``service`` answering from ``script``."""

    async def __call__(
        self, service: Service, script: Script, *, model: str = "default"
    ) -> tuple[Runtime, ScriptedProvider]: ...


@pytest.fixture
async def make_runtime(tmp_path: Path) -> AsyncIterator[MakeRuntime]:
    """Build runtimes on one SQLite file; every one is closed after the test."""
    made: list[Runtime] = []

    async def make(
        service: Service, script: Script, *, model: str = "default"
    ) -> tuple[Runtime, ScriptedProvider]:
        store = await journal_store(tmp_path / "journal.sqlite3")
        provider = ScriptedProvider(script, name=model)
        runtime = runtime_for(service, store=store, providers={model: provider})
        made.append(runtime)
        return runtime, provider

    yield make
    for runtime in made:
        await runtime.aclose()


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
