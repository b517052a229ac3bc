"""The kopf handlers keep no module state: settings are read at startup, not at import."""

from __future__ import annotations

import importlib

import kopf
import pytest

from ankka.operator import handlers


def test_importing_the_handlers_reads_no_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    # A bad setting is refused by the startup handler (naming it), not by the import.
    monkeypatch.setenv("ANKKA_OPERATOR_PROBE_TICK_SECONDS", "soon")
    reloaded = importlib.reload(handlers)
    assert not hasattr(reloaded, "SETTINGS")


def test_a_handler_run_before_startup_says_so() -> None:
    with pytest.raises(RuntimeError, match="startup handler has not run"):
        handlers.platform(kopf.Memo())


async def test_a_bad_setting_stops_the_operator_at_startup_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANKKA_OPERATOR_PROBE_TICK_SECONDS", "soon")
    memo = kopf.Memo()
    with pytest.raises(kopf.PermanentError, match="ANKKA_OPERATOR_PROBE_TICK_SECONDS='soon'"):
        await handlers.start(memo)
    assert memo == {}  # nothing half-built is left for the handlers
