"""Unit-tier fixtures: a runtime on a real SQLite file with the scripted provider."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ankka.runtime.agents import Service
from ankka.runtime.host import Runtime
from ankka.runtime.journal.sqlite import SqliteStore
from ankka.runtime.testing import ScriptedProvider

MakeRuntime = Callable[[Service, Sequence[dict[str, Any] | str]], Runtime]


@pytest.fixture
async def make_runtime(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """Build runtimes on one SQLite file; every one is closed after the test."""
    made: list[Runtime] = []

    async def make(
        service: Service, script: Sequence[dict[str, Any] | str], *, model: str = "default"
    ) -> tuple[Runtime, ScriptedProvider]:
        store = await SqliteStore.open(tmp_path / "journal.sqlite3")
        provider = ScriptedProvider(script, name=model)
        runtime = Runtime(service, store=store, providers={model: provider})
        made.append(runtime)
        return runtime, provider

    yield make
    for runtime in made:
        await runtime.aclose()
