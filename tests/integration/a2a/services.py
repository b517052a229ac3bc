"""The services the A2A tests serve: one agent each, so its card is also at the host root.

- ``chat``: a request agent (``echo``, streamed) and, in the same module, ``refunds`` (a tool
  that needs approval) for the INPUT_REQUIRED tests.
- ``research``: the autonomous researcher of examples/tasks.py, with a tool that takes
  ``$ANKKA_TEST_TOOL_SECONDS`` (so a test can kill the runtime while a task is at work).
"""

from __future__ import annotations

import os
import time

from ankka.runtime.agents import Service, Turn, TurnRequest
from ankka.runtime.tasks import Accepts, AutonomousAgent
from ankka.runtime.tools import tool
from examples.tasks import summary

chat = Service("chat")


@chat.agent("echo", description="Answers a question in a line.")
def echo(request: TurnRequest) -> Turn:
    return Turn(message=request.message, answer="stream")


approvals = Service("approvals")


@tool(requires_approval=True)
def refund(order: str, amount: float) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order}"


@approvals.agent("refunds", description="Refunds orders, with a person's approval.")
def refunds(request: TurnRequest) -> Turn:
    return Turn(message=request.message, tools=[refund])


@tool
def lookup(topic: str) -> str:
    """What is known about a topic."""
    time.sleep(float(os.environ.get("ANKKA_TEST_TOOL_SECONDS", "0")))
    return f"{topic} is known."


research = Service("research")
research.autonomous(
    AutonomousAgent(
        name="researcher",
        description="Researches a topic and summarises it.",
        instructions="Look the topic up, then complete the task.",
        tools=[lookup],
        accepts=[Accepts(summary, budget=5)],
    )
)

__all__ = ["approvals", "chat", "research"]
