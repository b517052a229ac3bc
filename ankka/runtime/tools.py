"""Function tools: :func:`tool` and its values (see :mod:`ankka.runtime.declare.tools`).

A public module: the path users import (README, examples, docs). It re-exports from the rooms below
``ankka.runtime`` and nothing inside the rooms imports it (.importlinter: the runtime's layers).
"""

from ankka.runtime.declare.tools import (
    ApprovalRule,
    RunnableTool,
    Tool,
    ToolOutcome,
    ToolSpec,
    approval_of,
    tool,
)

__all__ = ["ApprovalRule", "RunnableTool", "Tool", "ToolOutcome", "ToolSpec", "approval_of", "tool"]
