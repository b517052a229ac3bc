"""Autonomous agents and durable tasks: declaring (``declare``), the records and their pure
decisions (``records``), the stores (``store``, ``sqlite_store``, ``postgres_store``), what the
model is shown each iteration (``prompt``), the iteration loop (``iteration``), the host that
runs instances under leases (``host``), live notifications (``notify``) and the HTTP routes
(``http``)."""

from ankka.runtime.tasks.declare import (
    COMPLETE_TASK,
    FAIL_TASK,
    Accepts,
    AutonomousAgent,
    Rule,
    TaskType,
    rule,
)

__all__ = ["COMPLETE_TASK", "FAIL_TASK", "Accepts", "AutonomousAgent", "Rule", "TaskType", "rule"]
