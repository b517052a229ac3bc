"""A turn's ``max_output_tokens`` reaches the server on every wire, in that wire's own field.

The runtime runs a real turn through each preset's real provider against the stand-in, which
records the body it was sent: Chat Completions' ``max_tokens``, Responses'
``max_output_tokens``, Anthropic's ``max_tokens`` (the smaller of the turn's limit and the
model's ``_MAX_TOKENS``).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ankka.runtime.declare.agents import Service, Turn, TurnRequest
from tests.integration.providers.conftest import Build, Standin, settings_for
from tests.support.processes import ankka_command, start
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


# A task type's limit, through `ankka serve` and each wire's real provider: every iteration's
# request carries it (tests/integration/task_services.py: `brief`, at most 48 tokens).
BRIEF = 48


@pytest.mark.parametrize("wire", sorted(FIELD))
def test_a_task_types_output_token_limit_is_sent_on_every_iteration_in_the_wires_field(
    wire: str, standin: Standin, tmp_path: Path
) -> None:
    standin.script(
        [
            {"tool_calls": [{"name": "lookup", "arguments": {"topic": "ankka"}}]},
            {
                "tool_calls": [
                    {"name": "complete_task", "arguments": {"title": "t", "points": ["p"]}}
                ]
            },
        ]
    )
    settings = settings_for(wire, standin)
    env = {f"ANKKA_MODEL_DEFAULT_{k.upper()}": v for k, v in settings.items()}
    server = start(
        ankka_command(
            "serve", "tests.integration.task_services:brief", "--port", "0",
            "--store", f"sqlite:///{tmp_path / 'store.sqlite3'}",
        ),
        env=env,
    )  # fmt: skip
    try:
        put = httpx.put(
            f"{server.url}/v1/agents/researcher/tasks/t-{wire}",
            json={"type": "summary", "instructions": "Summarise ankka."},
        )
        assert put.status_code == 201, put.text
        done = httpx.get(f"{server.url}/v1/tasks/t-{wire}", params={"wait": 30}, timeout=60)
        assert done.json()["state"] == "completed", done.text
    finally:
        server.stop()
    sent = [r["body"] for r in standin.requests() if r["path"] != "/api/show"][-2:]
    assert [body[FIELD[wire]] for body in sent] == [BRIEF, BRIEF]
