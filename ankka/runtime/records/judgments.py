"""The journal record of a judgment's tokens: the session's judgment usage.

Judged guardrails spend tokens outside the turn's model calls. They are recorded as one
:class:`JudgmentUsage` per turn: in the same batch as the turn's messages, or alone (best
effort) when the turn wrote none (it was refused, it failed, or it does not write memory). The
conversation's fold passes over it; the session's summary adds it up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ankka.runtime.records.messages import Usage

__all__ = ["JudgmentUsage"]


@dataclass(frozen=True, slots=True)
class JudgmentUsage:
    usage: Usage
    agent: str = ""
    turn: str = ""

    kind: ClassVar[str] = "judgment_usage"

    def as_dict(self) -> dict[str, Any]:
        return {"usage": self.usage.as_dict(), "agent": self.agent, "turn": self.turn}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JudgmentUsage:
        return cls(Usage.from_dict(data["usage"]), str(data.get("agent", "")), str(data["turn"]))
