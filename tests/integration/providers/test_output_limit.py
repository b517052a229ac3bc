"""A turn's ``max_output_tokens`` reaches the server on every wire, in that wire's own field.

The runtime runs a real turn through each preset's real provider against the stand-in, which
records the body it was sent: Chat Completions' ``max_tokens``, Responses'
``max_output_tokens``, Anthropic's ``max_tokens`` (the smaller of the turn's limit and the
model's ``_MAX_TOKENS``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from tests.integration.providers.conftest import Build, Standin, settings_for
from tests.support.runtimes import runtime_for
from tests.support.stores import journal_store

FIELD = {
    "openai-compatible": "max_tokens",
    "openai": "max_output_tokens",
    "anthropic": "max_tokens",
}

service = Service("brief")


@service.agent("brief")
def brief(request: TurnRequest) -> Turn:
    return Turn(message=request.message, max_output_tokens=64)


@pytest.mark.parametrize("wire", sorted(FIELD))
async def test_the_turns_output_token_limit_is_sent_in_the_wires_field(
    wire: str, standin: Standin, build: Build, tmp_path: Path
) -> None:
    standin.script([{"text": "Short."}])
    provider = build("default", **settings_for(wire, standin))
    store = await journal_store(tmp_path / "journal.sqlite3")
    async with runtime_for(service, store=store, providers={"default": provider}) as runtime:
        result = await runtime.run(runtime.plan("brief", "s", "Say something."))
    assert result.reply == "Short."
    sent = [r["body"] for r in standin.requests() if r["path"] != "/api/show"]
    assert len(sent) == 1
    assert sent[0][FIELD[wire]] == 64
