"""Build a runtime (and a task host) for a test in one call, with the context's parts named
as the tests name them. The runtime's drivers take one :class:`Context`; a test usually wants
only a few of its parts set, so this spells the common ones as keywords."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ankka.runtime.declare.agents import Service, Turn
from ankka.runtime.drivers.approvals import Notify, Timers
from ankka.runtime.drivers.context import CompactionSetup, Context
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.drivers.tasks.host import HostOptions, TaskHost
from ankka.runtime.engine.loop import TurnOutcome
from ankka.runtime.providers.base import ModelProvider
from ankka.runtime.store.journal_store import JournalStore
from ankka.runtime.store.tasks import TaskStore
from tests.support.stores import journal_store

__all__ = ["make_context", "one_turn", "runtime_for", "task_host_for"]

_HOST = {f for f in HostOptions.__dataclass_fields__}


def make_context(
    service: Service,
    *,
    store: JournalStore,
    providers: Mapping[str, ModelProvider],
    compaction_providers: Mapping[str, ModelProvider] | None = None,
    compaction_leases: Any = None,
    compaction_workers: int = 4,
    **parts: Any,
) -> Context:
    """The context of a runtime on ``store`` and ``providers``; ``parts`` are
    :meth:`Context.open`'s other keywords (clock, approvals, judges, mcp, policy, ...)."""
    compaction = CompactionSetup(
        providers=compaction_providers, leases=compaction_leases, workers=compaction_workers
    )
    return Context.open(service, store=store, providers=providers, compaction=compaction, **parts)


def runtime_for(
    service: Service,
    *,
    store: JournalStore,
    providers: Mapping[str, ModelProvider],
    approval_notice_seconds: float = 300.0,
    approval_tick_seconds: float = 1.0,
    notify: Notify | None = None,
    **parts: Any,
) -> Runtime:
    """A runtime of its own context (see :func:`make_context`)."""
    context = make_context(service, store=store, providers=providers, **parts)
    timers = Timers(notice_seconds=approval_notice_seconds, tick_seconds=approval_tick_seconds)
    return Runtime(context, timers=timers, notify=notify)


def task_host_for(context: Context, store: TaskStore, **options: Any) -> TaskHost:
    """A task host on ``context``; ``options`` are :class:`HostOptions`' fields."""
    unknown = set(options) - _HOST
    if unknown:
        raise TypeError(f"not a task host option: {', '.join(sorted(unknown))}")
    return TaskHost(context, store=store, options=HostOptions(**options))


async def one_turn(effect: Turn, provider: ModelProvider, store_path: Path) -> TurnOutcome:
    """Run ``effect`` as one turn of an agent (the engine, as every turn runs) on a new
    SQLite store at ``store_path``; the finished turn's outcome."""
    service = Service("one-turn")
    service.agent("agent")(lambda request: effect)
    store = await journal_store(store_path)  # the runtime's aclose closes the Store
    async with runtime_for(service, store=store, providers={effect.model: provider}) as runtime:
        result = await runtime.run(runtime.plan("agent", "s", effect.message))
    return result.finished
