"""A real summary from a real model: llama.cpp serving SmolLM2 summarises a session.

The agent answers from a script (its answers are not what is tested); the summariser is the
real model, called directly by the consumer. Whatever a small model writes, the outcome must
be one of the two the journal knows: adopted (``HistoryCompacted``, shorter than what it
replaced, every identifier kept) or rejected by a check (``CompactionRejected`` with its
reason), and either way the model's usage is the session's compaction usage.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ankka.runtime.compaction import Compaction
from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from ankka.runtime.providers.chat_completions import ChatCompletionsProvider
from ankka.runtime.providers.scripted import ScriptedProvider
from ankka.runtime.records.compaction import (
    COMPACTED,
    REJECTED,
    CompactionRejected,
    HistoryCompacted,
)
from ankka.runtime.records.messages import SummaryMessage
from tests.integration.llamacpp import LlamaServer
from tests.support.runtimes import runtime_for
from tests.support.stores import journal_store

pytestmark = pytest.mark.integration

QUESTIONS = [
    "Hello! I ordered a blue teapot last week, order ORD-4417, and it has not arrived.",
    "I paid with my card and the shop said it would take three days.",
    "Can you tell me what I should do next? I would like it before the weekend.",
    "Also, my name is Maria Lindqvist, in case you need it for the order.",
]
ANSWER = "I am sorry to hear that. Please contact the shop with your order number and ask."


async def test_the_real_model_summarises_a_session_and_its_usage_is_recorded(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    service = Service("support")

    @service.agent("chat")
    def chat(request: TurnRequest) -> Turn:
        return Turn(
            message=request.message, compaction=Compaction(limit_chars=800, keep_messages=2)
        )

    # A generous deadline: on a loaded CI machine this small model has taken 90 s to answer.
    summariser = ChatCompletionsProvider(
        name="local",
        model=llama_server.model,
        base_url=llama_server.openai_base_url,
        timeout=600,
    )
    store = await journal_store(tmp_path / "journal.sqlite3")
    async with runtime_for(
        service,
        store=store,
        providers={"default": ScriptedProvider([ANSWER] * len(QUESTIONS), name="default")},
        compaction_providers={"default": summariser},
    ) as runtime:
        for question in QUESTIONS:
            await runtime.run(runtime.plan("chat", "s", question))
        await runtime.context.compactor.idle()
        stored = await runtime.context.journal.store.read("s")
        records = [
            e.record
            for e in await runtime.context.journal.read("s")
            if isinstance(e.record, HistoryCompacted | CompactionRejected)
        ]
        assert len(records) == 1, [e.kind for e in stored]
        record = records[0]
        assert record.model == llama_server.model
        assert record.usage.input_tokens > 50 and record.usage.output_tokens > 0
        totals = await runtime.summary("s")
        assert totals.compaction_usage == record.usage
        shown = await runtime.messages("s", as_sent=True)
        assert len(await runtime.messages("s")) == 2 * len(QUESTIONS)
        kind = stored[-1].kind
        if kind == COMPACTED:
            body = json.loads(stored[-1].body)
            assert body["summary"].strip() and body["chars_after"] < body["chars_before"]
            assert "ord-4417" in body["summary"].casefold()
            assert isinstance(shown[0], SummaryMessage)
        else:
            assert kind == REJECTED
            reason = json.loads(stored[-1].body)["reason"]
            assert reason in ("empty", "longer_than_replaced", "identifier_missing")
            assert not any(isinstance(m, SummaryMessage) for m in shown)
