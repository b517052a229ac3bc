"""A resumed turn's model records each call as it returns, and a record the store refuses
does not cost the turn its answer (the loop still accounts the call at the turn's end)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from ankka._kernel.clock import ManualClock
from ankka.runtime.drivers.resumed import RecordingProvider
from ankka.runtime.providers.base import ModelRequest
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.messages import ModelCall, UserMessage

_START = datetime(2026, 12, 1, tzinfo=UTC)
_REQUEST = ModelRequest(instructions="", messages=(UserMessage("hi"),))


async def test_each_answer_is_recorded_before_it_is_handed_on() -> None:
    recorded: list[ModelCall] = []

    async def record(call: ModelCall) -> None:
        recorded.append(call)

    model = RecordingProvider(ScriptedProvider(["one"]), "agent", record, ManualClock(_START))
    response = await model.complete(_REQUEST)

    assert response.content == "one"
    assert [(c.agent, c.provider) for c in recorded] == [("agent", model.name)]


async def test_a_record_the_store_refuses_is_logged_and_the_answer_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def record(call: ModelCall) -> None:
        raise RuntimeError("the store is gone")

    model = RecordingProvider(ScriptedProvider(["one"]), "agent", record, ManualClock(_START))
    with caplog.at_level(logging.WARNING, logger="ankka.approvals"):
        response = await model.complete(_REQUEST)

    assert response.content == "one"
    assert "could not journal a resumed call of agent (RuntimeError)" in caplog.text
    assert "the store is gone" not in caplog.text
