"""Who opened a session: its first journal record. Pure.

Sessions record the caller that created them and their agent, so the session policy
(:mod:`ankka.runtime.declare.policy`) can say who else may act on one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["SessionOpened", "opened_by"]


@dataclass(frozen=True, slots=True)
class SessionOpened:
    """The first record of a session: who created it."""

    kind: ClassVar[str] = "session_opened"

    caller: str
    agent: str | None = None  # whose session it is (the policy in force); None: older record

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"caller": self.caller}
        if self.agent is not None:
            data["agent"] = self.agent
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionOpened:
        agent = data.get("agent")
        return cls(str(data["caller"]), str(agent) if agent is not None else None)


def opened_by(records: Iterable[object]) -> SessionOpened | None:
    """Who created a session, for which agent: its first record says (a session older than
    the record: None)."""
    for record in records:
        return record if isinstance(record, SessionOpened) else None
    return None
