"""The request agent of the approval crash tests: the example's refunds agent with a tool that
says when it runs (a line per run in ``$ANKKA_TEST_TOOL_LOG``) and takes
``$ANKKA_TEST_TOOL_SECONDS`` (``$ANKKA_TEST_SMALL_TOOL_SECONDS`` for one that needs no
approval, so a test can kill the runtime after a resumed turn's model call), and a handler
that pauses ``$ANKKA_TEST_PLAN_SECONDS`` while the file ``$ANKKA_TEST_PLAN_PAUSE`` exists, so
a test can kill the runtime between a recorded decision and the approved call's recorded
start (resuming plans the turn again first). The autonomous ``researcher`` has a ``publish``
tool every call of which waits for approval."""

from __future__ import annotations

import os
import time

from ankka.runtime.agents import Service, Turn, TurnRequest
from ankka.runtime.tasks import Accepts, AutonomousAgent
from ankka.runtime.tools import tool
from examples.tasks import summary

service = Service("approvals-crash")


@tool(requires_approval=lambda args: args.amount > 100)
def refund(order: str, amount: float) -> str:
    """Refund an order."""
    stamps = os.environ.get("ANKKA_BENCH_TOOL_STAMPS")
    if stamps:  # bench/approvals.py: when the approved call started (wall clock)
        with open(stamps, "a", encoding="utf-8") as out:
            out.write(f"{time.time()!r}\n")
    log = os.environ.get("ANKKA_TEST_TOOL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as runs:
            runs.write(f"{order} {amount}\n")
    seconds = os.environ.get("ANKKA_TEST_TOOL_SECONDS", "0")
    if amount <= 100:  # a refund that needs no approval may take its own time
        seconds = os.environ.get("ANKKA_TEST_SMALL_TOOL_SECONDS", seconds)
    time.sleep(float(seconds))
    return f"refunded {amount} on {order}"


@service.agent("refunds")
def refunds(request: TurnRequest) -> Turn:
    pause = os.environ.get("ANKKA_TEST_PLAN_PAUSE")
    if pause and os.path.exists(pause):
        time.sleep(float(os.environ.get("ANKKA_TEST_PLAN_SECONDS", "0")))
    return Turn(message=request.message, tools=[refund], model="default")


@tool(requires_approval=True)
def publish(topic: str) -> str:
    """Publish what is known about a topic (every call waits for a person)."""
    log = os.environ.get("ANKKA_TEST_TOOL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as runs:
            runs.write(f"publish {topic}\n")
    return f"{topic} is published."


service.autonomous(
    AutonomousAgent(
        name="researcher",
        instructions="Publish the topic, then complete the task.",
        tools=[publish],
        accepts=[Accepts(summary, budget=5)],
    )
)

__all__ = ["service"]
