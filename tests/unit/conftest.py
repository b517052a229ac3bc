"""Unit-tier fixtures: a runtime on a real SQLite file with the scripted provider."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest

from ankka.runtime.declare.agents import Service
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.providers.scripted import ScriptedProvider
from tests.support.runtimes import runtime_for
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


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The cyclic garbage collector off for the test: what is left was not freed by
    reference counting."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
