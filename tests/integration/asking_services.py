"""Agents whose MCP server asks during a call (examples/mcp_catalog.py ``--elicit-tool``,
``--sampling-tool``): the request agent ``clerk`` allows the catalogue's sampling requests,
``guarded`` does not, ``streamer`` answers as a stream; the autonomous agent ``purchaser``
buys through the same tool and allows sampling too, as ``frugal`` does within a token
budget."""

from __future__ import annotations

from ankka.runtime.agents import McpServer, Service, Turn, TurnRequest
from ankka.runtime.tasks import Accepts, AutonomousAgent
from examples.tasks import summary

service = Service("asking")


@service.agent("clerk", mcp_servers=[McpServer("catalog", sampling=True)])
def clerk(request: TurnRequest) -> Turn:
    return Turn(message=request.message, instructions="Buy what the customer asks for.")


@service.agent("guarded", mcp_servers=["catalog"])
def guarded(request: TurnRequest) -> Turn:
    return Turn(message=request.message, instructions="Describe products.")


# The clerk, answering as a stream: a caller who leaves mid-turn cancels the turn.
@service.agent("streamer", mcp_servers=["catalog"])
def streamer(request: TurnRequest) -> Turn:
    return Turn(
        message=request.message, instructions="Buy what the customer asks for.", answer="stream"
    )


service.autonomous(
    AutonomousAgent(
        name="purchaser",
        instructions="Buy each product asked about, then complete the task.",
        mcp_servers=[McpServer("catalog", sampling=True)],
        accepts=[Accepts(summary, budget=4)],
    )
)

# The same, with a token budget its first model call spends: its server's sampling request
# may not make a model call past it.
service.autonomous(
    AutonomousAgent(
        name="frugal",
        instructions="Describe each product asked about, then complete the task.",
        mcp_servers=[McpServer("catalog", sampling=True)],
        accepts=[Accepts(summary, budget=4, tokens=12)],
    )
)

__all__ = ["service"]
