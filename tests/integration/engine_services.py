"""The autonomous agents of the engine's end-to-end tests: declared with the same names a
request agent takes (MCP servers, result guardrails, compaction).

- ``buyer`` lists the MCP server ``catalog`` (examples/mcp_catalog.py), refuses a result that
  tries to instruct the model (the shop's own guardrail), and is compacted past 700
  characters by the model ``summariser``;
- ``researcher`` (in ``wires``) has one function tool, for the wires' invariants.
"""

from __future__ import annotations

from ankka.runtime.agents import Service
from ankka.runtime.compaction import Compaction
from ankka.runtime.tasks import Accepts, AutonomousAgent
from examples.shop import no_instructions
from examples.tasks import lookup, summary

service = Service("engine")

service.autonomous(
    AutonomousAgent(
        name="buyer",
        instructions="Search the catalogue for each product asked about, then complete the task.",
        mcp_servers=["catalog"],
        result_guardrails=[no_instructions],
        description_guardrails=[no_instructions],
        compaction=Compaction(limit_chars=700, keep_messages=2, model="summariser"),
        accepts=[Accepts(summary, budget=10)],
    )
)

# Without MCP servers (so it needs none configured): the wires' invariants.
wires = Service("wires")
wires.autonomous(
    AutonomousAgent(
        name="researcher",
        instructions="Look the topics up, then complete the task.",
        tools=[lookup],
        accepts=[Accepts(summary, budget=4)],
    )
)

__all__ = ["service", "wires"]
