"""The shop agent: answers customers with the tools of the MCP server ``catalog``.

    python examples/mcp_catalog.py --port 8765 &
    ANKKA_MCP_CATALOG_URL=http://127.0.0.1:8765/mcp ankka serve examples.shop:service

The catalogue's tool ``search`` reaches the model as ``mcp__catalog__search``. What a server
answers is text someone else wrote, so it is checked before the model (or the journal) sees
it: a result that tries to instruct the model is withheld, and so is a tool whose description
does.
"""

from __future__ import annotations

import re

from ankka.runtime.agents import Service, Turn, TurnRequest
from ankka.runtime.guardrails import guardrail

service = Service("shop")

_INSTRUCTIONS = re.compile(
    r"ignore\s+(all\s+|any\s+)?(previous|prior|earlier)\s+instructions|you\s+are\s+now\b",
    re.IGNORECASE,
)


@guardrail
def no_instructions(text: str) -> str | None:
    """Refuse text that tries to give the model instructions (a prompt injection)."""
    if _INSTRUCTIONS.search(text):
        return "it tries to give the model instructions"
    return None


@service.agent("shop", description="Finds products in the catalogue.", mcp_servers=["catalog"])
def shop(request: TurnRequest) -> Turn:
    return Turn(
        message=request.message,
        instructions=(
            "You help customers of a small kitchen shop. Search the catalogue with "
            "mcp__catalog__search and answer with product names and prices."
        ),
        model="default",
        result_guardrails=[no_instructions],
        description_guardrails=[no_instructions],
    )
