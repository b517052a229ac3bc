"""The autonomous agent of the crash tests: the example's researcher with a tool that says
when it runs (a line per run in ``$ANKKA_TEST_TOOL_LOG``) and takes
``$ANKKA_TEST_TOOL_SECONDS`` to answer, so a test can kill the runtime while it runs."""

from __future__ import annotations

import os
import time

from ankka.runtime.agents import Service
from ankka.runtime.tasks import Accepts, AutonomousAgent, TaskType
from ankka.runtime.tools import tool
from examples.tasks import summary

service = Service("crash")


@tool
def lookup(topic: str) -> str:
    """What is known about a topic (a plain function: the platform runs it in a thread)."""
    log = os.environ.get("ANKKA_TEST_TOOL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as runs:
            runs.write(f"{topic}\n")
    time.sleep(float(os.environ.get("ANKKA_TEST_TOOL_SECONDS", "0")))
    return f"{topic} is known."


service.autonomous(
    AutonomousAgent(
        name="researcher",
        instructions="Look the topic up, then complete the task.",
        tools=[lookup],
        accepts=[Accepts(summary, budget=5)],
    )
)

# The same researcher on a task type whose answers are bounded (issue 32 item 6):
# tests/integration/providers/test_output_limit.py.
brief = Service("brief")
brief.autonomous(
    AutonomousAgent(
        name="researcher",
        instructions="Look the topic up, then complete the task.",
        tools=[lookup],
        accepts=[
            Accepts(
                TaskType(
                    "summary", result=summary.result, rules=summary.rules, max_output_tokens=48
                ),
                budget=5,
            )
        ],
    )
)

__all__ = ["brief", "service"]
