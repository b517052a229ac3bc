"""Every model call is accounted for, also in turns that write no messages (issue 13,
defect 8): a typed answer that does not decode, an output guardrail's refusal, a tool-round
overrun, a model failing on a later call and a ``write_memory=False`` turn each leave their
calls in the journal, in the session's usage (kept apart from the written turns' usage) and in
the metrics; the conversation is unchanged."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from ankka._kernel.errors import AnkkaError, ModelUnavailable, Refused, TurnFailed
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.declare.guardrails import Guardrail
from ankka.runtime.declare.policy import LOCAL
from ankka.runtime.declare.tools import tool
from ankka.runtime.records.accounting import NOT_WRITTEN, UnwrittenCalls
from ankka.runtime.records.messages import Usage
from ankka.runtime.records.session import SessionOpened
from ankka.runtime.serve.http import create_app

SPENT = {"input_tokens": 7, "output_tokens": 3}


class Forecast(BaseModel):
    celsius: float


@tool
def look() -> str:
    """Look around."""
    return "nothing"


def _service() -> Service:
    service = Service("accounting")

    @service.agent("typed")
    def typed(request: TurnRequest) -> Turn:
        return Turn(message=request.message, answer=Forecast)

    @service.agent("guarded")
    def guarded(request: TurnRequest) -> Turn:
        no = Guardrail("no_secrets", lambda text: "it said 'secret'" if "secret" in text else None)
        return Turn(message=request.message, output_guardrails=[no])

    @service.agent("looping")
    def looping(request: TurnRequest) -> Turn:
        return Turn(message=request.message, tools=[look], max_tool_rounds=1)

    @service.agent("forgetful")
    def forgetful(request: TurnRequest) -> Turn:
        return Turn(message=request.message, write_memory=False)

    return service


LOOK = {"tool_calls": [{"name": "look", "arguments": {}}], "usage": SPENT}


@pytest.mark.parametrize(
    ("agent", "script", "error", "calls"),
    [
        ("typed", [{"text": "warm", "usage": SPENT}], TurnFailed, 1),
        ("guarded", [{"text": "the secret", "usage": SPENT}], Refused, 1),
        ("looping", [LOOK, LOOK], TurnFailed, 2),
        ("looping", [LOOK, {"status": 503}], ModelUnavailable, 1),
    ],
    ids=["undecodable", "refused-output", "tool-rounds", "later-call-failed"],
)
async def test_a_failed_turns_calls_are_journaled_counted_and_summed_apart(
    make_runtime: Any, agent: str, script: list[Any], error: type[AnkkaError], calls: int
) -> None:
    runtime, _ = await make_runtime(_service(), ["fine", *script])
    await runtime.run(runtime.plan("forgetful", "other", "warm up"))  # noise elsewhere

    with pytest.raises(error) as failed:
        await runtime.run(runtime.plan(agent, "s", "hello"))

    [opened, entry] = await runtime.context.journal.read("s")
    assert opened.record == SessionOpened(LOCAL, agent), "the session records who created it"
    record = entry.record
    assert isinstance(record, UnwrittenCalls)
    assert (record.agent, record.reason, len(record.calls)) == (agent, failed.value.kind, calls)
    assert all(c.provider == "default" and c.model == "scripted" for c in record.calls)
    assert await runtime.messages("s") == []
    summary = await runtime.summary("s")
    assert (summary.turns, summary.usage) == (0, Usage())
    assert summary.tally.unwritten_turns == 1
    assert summary.tally.unwritten == Usage(7 * calls, 3 * calls)
    metrics = runtime.metrics.render().decode()
    assert (
        f'ankka_tokens_total{{agent="{agent}",kind="input",provider="default"}} {7.0 * calls}'
        in metrics
    )


async def test_an_unwritten_turns_calls_are_accounted_and_the_conversation_is_untouched(
    make_runtime: Any,
) -> None:
    runtime, _ = await make_runtime(_service(), [{"text": "noted", "usage": SPENT}])

    result = await runtime.run(runtime.plan("forgetful", "s", "remember nothing"))

    assert result.reply == "noted"
    [_, entry] = await runtime.context.journal.read("s")
    assert isinstance(entry.record, UnwrittenCalls)
    assert entry.record.reason == NOT_WRITTEN
    assert await runtime.messages("s") == []
    assert (await runtime.summary("s")).tally.unwritten == Usage(7, 3)


async def test_a_turn_refused_before_any_model_call_leaves_nothing(make_runtime: Any) -> None:
    service = Service("s")

    @service.agent("shy")
    def shy(request: TurnRequest) -> Turn:
        refuse = Guardrail("never", lambda text: "no")
        return Turn(message=request.message, input_guardrails=[refuse])

    runtime, _ = await make_runtime(service, [])

    with pytest.raises(Refused):
        await runtime.run(runtime.plan("shy", "s", "hello"))
    assert await runtime.context.journal.read("s") == []


async def test_the_api_shows_every_call_and_both_usages(make_runtime: Any) -> None:
    runtime, _ = await make_runtime(
        _service(), [{"text": "fine", "usage": SPENT}, {"text": "warm", "usage": SPENT}]
    )
    await runtime.run(runtime.plan("guarded", "s", "hello"))
    with pytest.raises(TurnFailed):
        await runtime.run(runtime.plan("typed", "s", "and now?"))

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(runtime)), base_url="http://runtime"
    ) as client:
        summary = (await client.get("/v1/sessions/s")).json()
        calls = (await client.get("/v1/sessions/s/calls")).json()["calls"]

    assert summary["usage"]["input_tokens"] == 7 and summary["turns"] == 1
    assert summary["unwritten_turns"] == 1 and summary["unwritten_usage"]["input_tokens"] == 7
    assert summary["total_usage"]["input_tokens"] == 14
    assert [(c["agent"], c["written"], c["reason"]) for c in calls] == [
        ("guarded", True, None),
        ("typed", False, "turn_failed"),
    ]
