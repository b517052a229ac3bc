"""The session policy of an Agent (``Agent.spec.access``), rendered by the operator as the
runtime's ``--access-file`` (docs/security.md, The session policy). Part of the Agent's wire
shape (``ankka.api.resources``), split out to keep that module small.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ankka.api.wire import Wire

__all__ = ["AgentAccess", "Rights"]

_CALLER_PATTERN = r"^[^*\s]+\*?$|^\*$"


class Rights(Wire):
    """Who else holds which right over a session, by caller pattern: a caller's name (local,
    a static-token name, system:serviceaccount:NS:NAME, ankka://service/NS/AGENT or NS/AGENT)
    or such a name ending in * for every caller it begins."""

    read: list[Annotated[str, Field(pattern=_CALLER_PATTERN, max_length=256)]] = Field(
        default_factory=list, max_length=64
    )
    """May read the sessions (messages, summary, calls; a task's record; its approvals)."""
    write: list[Annotated[str, Field(pattern=_CALLER_PATTERN, max_length=256)]] = Field(
        default_factory=list, max_length=64
    )
    """May send the sessions turns (a task: send it again, cancel it); implies read."""
    decide: list[Annotated[str, Field(pattern=_CALLER_PATTERN, max_length=256)]] = Field(
        default_factory=list, max_length=64
    )
    """May decide the sessions' approvals; implies read."""


class AgentAccess(Wire):
    """The session policy, rendered as the runtime's --access-file: it replaces, entry by
    entry, what the module declares (docs/security.md, The session policy)."""

    service: Rights | None = None
    """Every agent's sessions, unless the agent has its own entry."""
    agents: dict[str, Rights] = Field(default_factory=dict, max_length=64)
    """One agent's sessions, by the agent's name in the module (a name the module does not
    declare stops the runtime at start, naming it)."""
