"""Declaring agents and services: :class:`Service`, the :class:`Turn` a handler returns,
:class:`TurnRequest`, :class:`Memory`, :class:`McpServer` (see :mod:`ankka.runtime.declare.agents`).

A public module: the path users import (README, examples, docs). It re-exports from the rooms below
``ankka.runtime`` and nothing inside the rooms imports it (.importlinter: the runtime's layers).
"""

from ankka.runtime.declare.agents import Answer, Compaction, Memory, Service, Turn, TurnRequest
from ankka.runtime.declare.mcp import McpServer

__all__ = ["Answer", "Compaction", "McpServer", "Memory", "Service", "Turn", "TurnRequest"]
