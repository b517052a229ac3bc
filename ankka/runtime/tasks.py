"""Autonomous agents and the task types they accept: :class:`AutonomousAgent`,
:class:`TaskType`, :class:`Accepts`, rules (see :mod:`ankka.runtime.declare.autonomous`).

A public module: the path users import (README, examples, docs). It re-exports from the rooms
below ``ankka.runtime`` and nothing inside the rooms imports it (.importlinter: the runtime's
layers).
"""

from ankka.runtime.declare.autonomous import (
    COMPLETE_TASK,
    FAIL_TASK,
    Accepts,
    AutonomousAgent,
    Rule,
    TaskType,
    rule,
)
from ankka.runtime.declare.delegation import Delegate, Handoff, Limits

__all__ = [
    "COMPLETE_TASK",
    "FAIL_TASK",
    "Accepts",
    "AutonomousAgent",
    "Delegate",
    "Handoff",
    "Limits",
    "Rule",
    "TaskType",
    "rule",
]
