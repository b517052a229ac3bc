"""The task tree the combined trace test runs (test_tree_traces.py): ``lead`` calls a function
tool (``lookup``), an MCP server's tool (the catalogue's ``search``) and delegates a summary to
``researcher`` (examples/tasks.py's), all in its first answer, then completes a report."""

from __future__ import annotations

from ankka.runtime.agents import Service
from ankka.runtime.tasks import Accepts, AutonomousAgent, Delegate
from examples import tasks
from examples.tasks import lookup, summary
from examples.team import report

service = Service("tree")
researcher = service.autonomous(tasks.researcher)
lead = service.autonomous(
    AutonomousAgent(
        name="lead",
        accepts=[Accepts(report, budget=6)],
        tools=[lookup],
        mcp_servers=["catalog"],
        delegates=[Delegate(researcher, summary)],
    )
)
