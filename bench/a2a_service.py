"""The request agent bench/a2a_overhead.py serves: one plain turn, no tools."""

from __future__ import annotations

from ankka.runtime.agents import Service, Turn, TurnRequest

service = Service("bench-a2a")


@service.agent("plain", description="Answers in a line.")
def plain(request: TurnRequest) -> Turn:
    return Turn(message=request.message)
