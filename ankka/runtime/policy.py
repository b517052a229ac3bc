"""Who may act on a session: :class:`Access` and the session policy (see
:mod:`ankka.runtime.declare.policy`).

A public module: the path users import (README, examples, docs). It re-exports from the rooms below
``ankka.runtime`` and nothing inside the rooms imports it (.importlinter: the runtime's layers).
"""

from ankka.runtime.declare.policy import Access, Right, SessionPolicy, load_policy, parse_access

__all__ = ["Access", "Right", "SessionPolicy", "load_policy", "parse_access"]
