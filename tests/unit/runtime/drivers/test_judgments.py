"""Judgment handlers are declared and called like agents; the runtime asks and verifies."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from ankka._kernel.errors import ConfigurationError, NotFound
from ankka.runtime.declare.agents import Service
from ankka.runtime.drivers.request import Runtime
from ankka.runtime.judgments import JudgmentPlan, JudgmentProvider, JudgmentRequest
from ankka.runtime.providers.scripted import ScriptedJudgmentProvider, ScriptedProvider
from ankka.runtime.records.messages import Usage
from examples.triage import service as triage_service
from tests.support.runtimes import runtime_for
from tests.support.stores import journal_store

Make = Callable[..., Awaitable[Runtime]]


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Make]:
    made: list[Runtime] = []

    async def build(service: Service, judges: dict[str, JudgmentProvider]) -> Runtime:
        store = await journal_store(tmp_path / "journal.sqlite3")
        providers = {"default": ScriptedProvider([], name="default")}
        runtime = runtime_for(service, store=store, providers=providers, judges=judges)
        made.append(runtime)
        return runtime

    yield build
    for runtime in made:
        await runtime.aclose()


async def test_the_triage_example_asks_its_two_questions_of_the_default_model(make: Make) -> None:
    judge = ScriptedJudgmentProvider(
        {"urgent": {"yes": 0.25, "no": 0.75}, "team": "billing"}, usage=Usage(80, 2)
    )
    runtime = await make(triage_service, {"default": judge})

    judgment = await runtime.judge("triage", "I was charged twice.")

    assert judgment.as_dict() == {
        "answers": {
            "urgent": {
                "probabilities": {"yes": 0.25, "no": 0.75},
                "coverage": 1.0,
                "measured": "scripted",
            },
            "team": {
                "probabilities": {"billing": 1.0, "shipping": 0.0, "other": 0.0},
                "coverage": 1.0,
                "measured": "scripted",
            },
        },
        "usage": Usage(80, 2).as_dict(),
    }
    assert "I was charged twice." in judge.inquiries[0].text
    assert b'ankka_judgments_total{handler="triage"} 1.0' in runtime.metrics.render()


async def test_an_unknown_judgment_handler_is_not_found_naming_the_known(make: Make) -> None:
    runtime = await make(triage_service, {})
    with pytest.raises(NotFound, match=r"no judgment handler 'sort'.*triage"):
        await runtime.judge("sort", "hi")


async def test_a_model_whose_preset_answers_no_judgments_is_a_configuration_error(
    make: Make,
) -> None:
    runtime = await make(triage_service, {})
    with pytest.raises(ConfigurationError, match=r"model 'default'.*does not answer judgments"):
        await runtime.judge("triage", "hi")


async def test_a_handler_that_returns_no_plan_is_named(make: Make) -> None:
    service = Service("test")

    @service.judgment("odd")
    def odd(request: JudgmentRequest) -> JudgmentPlan:
        return "not a plan"  # type: ignore[return-value]

    runtime = await make(service, {})
    with pytest.raises(ConfigurationError, match=r"'odd': its handler returned str"):
        await runtime.judge("odd", "hi")


def test_a_judgment_handler_cannot_take_an_agents_name() -> None:
    service = Service("test")

    @service.judgment("triage")
    def first(request: JudgmentRequest) -> JudgmentPlan:
        raise AssertionError

    with pytest.raises(ConfigurationError, match=r"agent 'triage' is declared twice"):
        service.agent("triage")(lambda request: None)  # type: ignore[arg-type,return-value]
