"""Teams over a shared backlog and moderated conversations: :class:`Team`,
:class:`Conversation` and its moderators (see :mod:`ankka.runtime.declare.teams`,
docs/teams.md).

A public module: the path users import (examples, docs). It re-exports from the rooms below
``ankka.runtime`` and nothing inside the rooms imports it (.importlinter: the runtime's
layers).
"""

from ankka.runtime.declare.teams import (
    Conversation,
    EndReason,
    Moderated,
    RoundRobin,
    Selector,
    Spoken,
    Team,
)

__all__ = [
    "Conversation",
    "EndReason",
    "Moderated",
    "RoundRobin",
    "Selector",
    "Spoken",
    "Team",
]
